// Fuzzes the validation entry point of variable creation,
// varsync::validate_variable_spec (sync/policy/sync_policy.hpp), with a fuzzed
// variable_spec: name bytes, a dtype byte (any value, also invalid ones), a
// shape, sync / aggregation bytes cast to the enums (any value), trainable
// unset / false / true. Then the policy of an accepted variable answers every
// question the actors ask it, and scalar_for converts a fuzzed double.
//
// Strategy creation from fuzzed strategy_options would need an actor system
// per input; the checks it makes on the options (device strings) are fuzzed by
// parse_device_fuzzer, and the per-variable rules here.
//
// The harness bounds the initial value to 4096 elements: tensor construction
// is not what is fuzzed here (deserialize_fuzzer fuzzes tensors from bytes).

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include <fuzzer/FuzzedDataProvider.h>

#include "varsync/error.hpp"
#include "varsync/tensor.hpp"
#include "fuzz_check.hpp"
#include "varsync/variable.hpp"
#include "sync/policy/sync_policy.hpp"

using namespace varsync;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in{data, size};
  auto type_byte = in.ConsumeIntegral<uint8_t>();
  auto sync_byte = in.ConsumeIntegral<uint8_t>();
  auto agg_byte = in.ConsumeIntegral<uint8_t>();
  auto trainable_byte = in.ConsumeIntegral<uint8_t>();
  auto rank = in.ConsumeIntegralInRange<size_t>(0, 6);
  tensor_shape shape;
  int64_t count = 1;
  for (size_t i = 0; i < rank; ++i) {
    auto extent = in.ConsumeIntegralInRange<int64_t>(0, 16);
    shape.push_back(extent);
    count *= extent;
  }
  if (count > 4096)
    return 0;
  auto scalar = in.ConsumeFloatingPoint<double>();
  auto num_replicas = in.ConsumeIntegralInRange<int>(1, 64);

  variable_spec spec;
  spec.name = in.ConsumeRemainingBytesAsString();
  spec.initial_value = tensor::zeros(static_cast<dtype>(type_byte), shape);
  spec.sync = static_cast<synchronization>(sync_byte);
  spec.agg = static_cast<aggregation>(agg_byte);
  switch (trainable_byte % 3) {
    case 0: spec.trainable.reset(); break;
    case 1: spec.trainable = false; break;
    default: spec.trainable = true;
  }

  auto info = validate_variable_spec(spec);
  if (!info) {
    auto code = code_of(info.error());
    FUZZ_CHECK(code == errc::invalid_argument
                 || code == errc::invalid_synchronization
                 || code == errc::invalid_aggregation,
               "unexpected error code");
    FUZZ_CHECK(!message_of(info.error()).empty(), "empty error message");
    // What must have been rejected.
    return 0;
  }
  // What must never be accepted.
  FUZZ_CHECK(!spec.name.empty(), "accepted an empty name");
  FUZZ_CHECK(sync_byte <= 3 && agg_byte <= 3, "accepted an invalid enum");
  FUZZ_CHECK(type_byte <= static_cast<uint8_t>(dtype::int64),
             "accepted an invalid dtype");
  FUZZ_CHECK(info->id == 0, "validation assigned an id");
  FUZZ_CHECK(info->name == spec.name, "name changed");
  FUZZ_CHECK(info->type == spec.initial_value.type(), "dtype changed");
  FUZZ_CHECK(info->shape == shape, "shape changed");
  FUZZ_CHECK(info->sync == synchronization::none
               || info->sync == synchronization::on_write
               || info->sync == synchronization::on_read,
             "synchronization not resolved");
  FUZZ_CHECK(info->agg == spec.agg, "aggregation changed");
  FUZZ_CHECK(info->agg != aggregation::mean || is_floating(info->type),
             "mean aggregation of an integer dtype");
  FUZZ_CHECK(info->sync != synchronization::on_read || !info->trainable,
             "trainable on_read variable");
  if (spec.trainable && info->sync != synchronization::on_read)
    FUZZ_CHECK(info->trainable == *spec.trainable, "trainable changed");

  // The initial value itself passes the value check (C7).
  FUZZ_CHECK(!validate_value(*info, spec.initial_value, "initial value"),
             "the initial value does not match its own variable");

  // Every question the actors ask the policy has an answer.
  auto& policy = policy_for(info->sync);
  FUZZ_CHECK(policy.kind() == info->sync, "policy of another mode");
  auto plan = policy.cross_replica_read(*info, num_replicas);
  FUZZ_CHECK((plan.source == read_source::none) == static_cast<bool>(plan.error),
             "a read plan has an error iff it has no source");
  for (auto op : {update_op::assign, update_op::assign_add,
                  update_op::assign_sub}) {
    auto target = policy.cross_replica_update(*info, op);
    FUZZ_CHECK(target == update_target::every_component
                 || target == update_target::first_component
                 || target == update_target::split,
               "invalid update target");
  }
  if (policy.collective_replica_updates())
    (void) policy.combine_contributions(*info);

  // Scalar convenience conversion: a value or a clean error.
  auto s = scalar_for(*info, scalar);
  if (s) {
    FUZZ_CHECK(shape.empty(), "scalar for a non-scalar variable");
    FUZZ_CHECK(s->type() == info->type && s->shape().empty() && s->size() == 1,
               "scalar of the wrong dtype or shape");
    if (!is_floating(info->type))
      FUZZ_CHECK(s->as_double() == scalar, "integer scalar not exact");
  } else {
    FUZZ_CHECK(has_code(s.error(), errc::shape_mismatch)
                 || has_code(s.error(), errc::invalid_argument),
               "unexpected scalar_for error");
  }
  return 0;
}
