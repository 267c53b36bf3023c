// Fuzzes the deserialization of varsync's messages as replicas in other
// processes would receive them: CAF 0.17's caf::binary_deserializer over the
// input bytes into varsync::tensor, variable_spec, variable_info,
// step_report, std::vector<tensor>, std::vector<variable_info>,
// sequenced_operation (services mode's operations, which cross processes
// over caf::io: the inspect functions of messages/*.hpp), strategy_metrics
// (the answer to metrics_atom) and replica_usage (a replica's counts).
//
// Input layout: byte 0 selects the type, the rest is the serialized value.
//
// Properties: deserialization never crashes and never throws; a tensor it
// accepts is consistent (dtype valid, element count = product of the shape,
// byte count = elements x dtype size, every element readable) and serializes
// back to a tensor that deserializes to the same value; a deserialized
// variable_spec goes through validate_variable_spec like a remote creation
// request.
//
// Length prefixes. CAF 0.17 reads a sequence length as a varbyte uint32 and,
// for std::vector<char> (the tensor's byte block), resizes the vector to that
// length BEFORE checking that the input holds so many bytes: a 6-byte message
// makes it allocate and zero 4 GiB. That is a CAF behaviour, not a varsync
// bug, but varsync's tensor inspect is exposed to it (see
// docs/sanitizers-and-fuzzing.md). So that the fuzzer can look for other
// problems, it bounds its input first: it walks the same wire layout and skips
// inputs in which a byte block claims more bytes than remain, or a length
// prefix is longer than the 5 bytes a uint32 needs (which CAF decodes with
// shifts of 32 bits or more). Set VARSYNC_FUZZ_UNBOUNDED=1 to hand every
// input to CAF unchanged and reproduce the allocation.
// Deserialized enum fields (dtype, synchronization, aggregation, update_op)
// must be in range: the inspect load callbacks reject the rest (V4). Beyond
// "what is accepted is in range", every accepted variable_spec, variable_info
// and step_report is serialized again with one enum field set out of range
// (serializing checks nothing), and that message must be rejected.

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/binary_deserializer.hpp>
#include <caf/binary_serializer.hpp>

#include "varsync/error.hpp"
#include "varsync/tensor.hpp"
#include "fuzz_check.hpp"
#include "varsync/config.hpp"
#include "varsync/internal/step_report.hpp"
#include "varsync/step_task.hpp"
#include "varsync/internal/tensor_inspect.hpp"
#include "varsync/variable.hpp"
#include "messages/replica_usage.hpp"
#include "messages/sequenced_operation.hpp"
#include "varsync/ext/metrics.hpp"
#include "varsync/ext/sync_advice.hpp"
#include "sync/policy/sync_policy.hpp"

using namespace varsync;

namespace {

// -- the input bound ----------------------------------------------------------

/// Walks CAF 0.17's binary layout of the fuzzed types and flags inputs that
/// must not reach CAF: a byte block (std::vector<char>, or a std::string)
/// claiming more bytes than remain, or a length prefix longer than 5 bytes.
/// Running out of input is fine: CAF fails cleanly at the same point, so the
/// walk just stops there.
class wire_bound {
public:
  wire_bound(const uint8_t* data, size_t size) : p_(data), end_(data + size) {
  }

  /// True if the input must be skipped.
  bool bad() const {
    return bad_;
  }

  void tensor_value() {
    skip(1);                   // dtype
    skip(uint64_t{seq()} * 8); // shape: int64 extents
    bytes(seq());              // the raw bytes
  }

  void string_value() {
    bytes(seq());
  }

  void variable_spec_value() {
    string_value(); // name
    tensor_value(); // initial value
    skip(3);        // sync, agg, trainable
  }

  void variable_info_value() {
    skip(8);                   // id
    string_value();            // name
    skip(1);                   // dtype
    skip(uint64_t{seq()} * 8); // shape
    skip(3);                   // sync, agg, trainable
  }

  void recorded_update_value() {
    skip(9); // variable id, op
    tensor_value();
    skip(8);                   // staged buffer id
    skip(2);                   // scatter, scatter op
    skip(uint64_t{seq()} * 8); // indices
    skip(1);                   // alike
  }

  void step_report_value() {
    vector_value([&] { recorded_update_value(); });
    skip(1);                                 // suspended
    skip(1 + 1 + 8 + 4);                     // kind, op, axis, root
    vector_value([&] { tensor_value(); });   // the collective's values
  }

  void strategy_metrics_value() {
    skip(2 * 4 + 23 * 8); // the strategy's figures
    vector_value([&] {    // replicas
      skip(4);
      string_value(); // device
      skip(6 * 8 + 2);
    });
    vector_value([&] { skip(4 + 3 * 8); }); // process rounds
    vector_value([&] {                      // variables
      skip(8);
      string_value(); // name
      skip(3 + 10 * 8); // sync, agg, trainable, the figures
    });
  }

  void replica_usage_value() {
    for (int k = 0; k < 3; ++k)
      skip(uint64_t{seq()} * 8); // ids, reads, updates
    skip(2 * 8);
  }

  void sequenced_operation_value() {
    skip(8 + 4 + 8 + 8);  // sequence, origin, ticket, epoch
    operation_value();    // messages/operation.hpp
    skip(1 + 1);               // deferred: present, dtype
    skip(uint64_t{seq()} * 8); // deferred: shape
    skip(8);                   // deferred: indices
  }

  // The variant's tag, then the alternative's fields.
  void operation_value() {
    switch (byte()) {
      case 0: variable_spec_value(); break;  // create
      case 1: string_value(); break;         // lookup
      case 3: case 4: case 7: case 8: case 9: // by variable id
        skip(8);
        break;
      case 5: // update: variable, op, value
        skip(8 + 1);
        tensor_value();
        break;
      case 6: // scatter: variable, op, indices, rows
        skip(8 + 1);
        skip(uint64_t{seq()} * 8);
        tensor_value();
        break;
      case 11: // all_reduce: op, rows of tensors
        skip(1);
        vector_value([&] { vector_value([&] { tensor_value(); }); });
        break;
      case 14: // agree: carries a caf::error, whose layout is CAF's own
        bad_ = true;
        break;
      case 15: string_value(); break; // wait_for
      default: break; // no fields, or a tag CAF refuses at once
    }
  }

  template <class F>
  void vector_value(F element) {
    auto n = seq();
    for (uint32_t i = 0; i < n && !stopped(); ++i)
      element();
  }

private:
  bool stopped() const {
    return bad_ || truncated_;
  }

  size_t remaining() const {
    return static_cast<size_t>(end_ - p_);
  }

  uint8_t byte() {
    if (stopped())
      return 0;
    if (p_ >= end_) {
      truncated_ = true;
      return 0;
    }
    return *p_++;
  }

  void skip(uint64_t n) {
    if (stopped())
      return;
    if (n > remaining()) {
      truncated_ = true;
      p_ = end_;
      return;
    }
    p_ += n;
  }

  void bytes(uint64_t n) {
    if (stopped())
      return;
    if (n > remaining()) {
      bad_ = true; // CAF would allocate n bytes before its range check
      return;
    }
    p_ += n;
  }

  // CAF 0.17 binary_deserializer::begin_sequence: little-endian base-128,
  // accumulated in a uint32_t (5 bytes at most for a valid prefix).
  uint32_t seq() {
    if (stopped())
      return 0;
    uint32_t x = 0;
    for (int n = 0;; ++n) {
      if (p_ >= end_) {
        truncated_ = true;
        return 0;
      }
      if (n >= 5) {
        bad_ = true; // CAF would shift a uint32_t by 35 bits or more
        return 0;
      }
      auto b = *p_++;
      x |= static_cast<uint32_t>(b & 0x7f) << (7 * n);
      if ((b & 0x80) == 0)
        return x;
    }
  }

  const uint8_t* p_;
  const uint8_t* end_;
  bool bad_ = false;
  bool truncated_ = false;
};

// -- the actor system ---------------------------------------------------------

caf::actor_system& system_once() {
  static auto* cfg = [] {
    auto* c = new caf::actor_system_config;
    register_types(*c);
    return c;
  }();
  static auto* sys = new caf::actor_system{*cfg};
  return *sys;
}

bool env_flag(const char* name) {
  auto* v = std::getenv(name);
  return v != nullptr && *v != '\0' && std::strcmp(v, "0") != 0;
}

// -- properties ---------------------------------------------------------------

template <class T>
bool deserialize(const uint8_t* data, size_t size, T& x) {
  caf::binary_deserializer source{system_once(),
                                  reinterpret_cast<const char*>(data), size};
  auto err = source(x);
  return !err;
}

template <class T>
std::vector<char> serialize(T& x) {
  std::vector<char> buf;
  caf::binary_serializer sink{system_once(), buf};
  auto err = sink(x);
  FUZZ_CHECK(!err, "serializing a deserialized value failed");
  return buf;
}

void check_tensor(const tensor& t) {
  auto type = static_cast<uint8_t>(t.type());
  FUZZ_CHECK(type <= static_cast<uint8_t>(dtype::int64), "invalid dtype");
  auto n = element_count(t.shape());
  FUZZ_CHECK(n >= 0 && n == t.size(), "element count != product of shape");
  auto expected = static_cast<unsigned __int128>(t.size()) * size_of(t.type());
  FUZZ_CHECK(expected == t.nbytes(),
             "byte count != elements x dtype size (overflow?)");
  // Touch every byte and read elements (ASan checks the buffer bounds).
  auto* bytes = static_cast<const unsigned char*>(t.raw());
  unsigned sum = 0;
  for (size_t i = 0; i < t.nbytes(); ++i)
    sum += bytes[i];
  double acc = 0;
  for (int64_t i = 0; i < t.size() && i < 4096; ++i)
    acc += t.as_double(i);
  (void) sum;
  (void) acc;
  (void) t.debug_string();
  auto copy = t.clone();
  FUZZ_CHECK(copy.bitwise_equal(t), "clone differs");
}

void check_tensor_round_trip(tensor& t) {
  auto buf = serialize(t);
  tensor again;
  FUZZ_CHECK(deserialize(reinterpret_cast<const uint8_t*>(buf.data()),
                         buf.size(), again),
             "a serialized tensor does not deserialize");
  FUZZ_CHECK(again.bitwise_equal(t), "tensor round trip changed the value");
}

void check_enums(synchronization sync, aggregation agg) {
  FUZZ_CHECK(is_valid(sync), "synchronization out of range after deserialization");
  FUZZ_CHECK(is_valid(agg), "aggregation out of range after deserialization");
}

void check_info(const variable_info& info) {
  FUZZ_CHECK(is_valid(info.type), "dtype out of range after deserialization");
  check_enums(info.sync, info.agg);
  (void) to_string(info.shape);
  (void) to_string(info.type);
}

/// The enums and tensors of a deserialized operation are valid.
void check_operation(operation& op) {
  if (auto* x = std::get_if<ops::update>(&op)) {
    FUZZ_CHECK(is_valid(x->how), "update_op out of range");
    check_tensor(x->value);
  } else if (auto* x = std::get_if<ops::scatter>(&op)) {
    FUZZ_CHECK(is_valid(x->how), "scatter_op out of range");
    check_tensor(x->slices.values);
  } else if (auto* x = std::get_if<ops::create>(&op)) {
    check_tensor(x->spec.initial_value);
    check_enums(x->spec.sync, x->spec.agg);
  }
}

/// A byte past an enum's last value `max`, chosen by the input.
template <class E>
E out_of_range(E max, uint8_t pick) {
  auto first = static_cast<unsigned>(max) + 1;
  return static_cast<E>(first + pick % (256 - first));
}

/// `x` serializes and deserializes again; with `corrupt` applied (an enum
/// set out of range) it no longer deserializes.
template <class T, class Corrupt>
void check_rejects_corrupted(T x, Corrupt corrupt) {
  auto buf = serialize(x);
  T again;
  FUZZ_CHECK(deserialize(reinterpret_cast<const uint8_t*>(buf.data()),
                         buf.size(), again),
             "a serialized message does not deserialize");
  corrupt(x);
  buf = serialize(x);
  FUZZ_CHECK(!deserialize(reinterpret_cast<const uint8_t*>(buf.data()),
                          buf.size(), again),
             "an out-of-range enum was accepted");
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  (void) system_once();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1)
    return 0;
  auto selector = data[0] % 9;
  // Which enum a corruption check sets out of range, and to what.
  const uint8_t pick = data[size - 1];
  ++data;
  --size;

  if (!env_flag("VARSYNC_FUZZ_UNBOUNDED")) {
    wire_bound w{data, size};
    switch (selector) {
      case 0: w.tensor_value(); break;
      case 1: w.variable_spec_value(); break;
      case 2: w.variable_info_value(); break;
      case 3: w.step_report_value(); break;
      case 4: w.vector_value([&] { w.tensor_value(); }); break;
      case 5: w.vector_value([&] { w.variable_info_value(); }); break;
      case 6: w.sequenced_operation_value(); break;
      case 7: w.strategy_metrics_value(); break;
      case 8: w.replica_usage_value(); break;
    }
    if (w.bad())
      return -1; // never handed to CAF, not added to the corpus
  }

  switch (selector) {
    case 0: {
      tensor t;
      if (deserialize(data, size, t)) {
        check_tensor(t);
        check_tensor_round_trip(t);
      }
      break;
    }
    case 1: {
      variable_spec spec;
      if (deserialize(data, size, spec)) {
        check_tensor(spec.initial_value);
        check_enums(spec.sync, spec.agg);
        check_rejects_corrupted(spec, [pick](variable_spec& x) {
          if (pick % 2 == 0)
            x.sync = out_of_range(synchronization::on_read, pick);
          else
            x.agg = out_of_range(aggregation::only_first_replica, pick);
        });
        // A remote creation request is validated before anything happens.
        auto info = validate_variable_spec(spec);
        if (!info)
          FUZZ_CHECK(code_of(info.error()) != errc::none,
                     "rejected without a varsync error");
        else
          FUZZ_CHECK(!validate_value(*info, spec.initial_value, "initial"),
                     "accepted spec whose value does not match");
      }
      break;
    }
    case 2: {
      variable_info info;
      if (deserialize(data, size, info)) {
        check_info(info);
        check_rejects_corrupted(info, [pick](variable_info& x) {
          switch (pick % 3) {
            case 0: x.type = out_of_range(dtype::int64, pick); break;
            case 1: x.sync = out_of_range(synchronization::on_read, pick); break;
            default: x.agg = out_of_range(aggregation::only_first_replica, pick);
          }
        });
      }
      break;
    }
    case 3: {
      step_report report;
      if (deserialize(data, size, report)) {
        for (auto& u : report.updates) {
          FUZZ_CHECK(is_valid(u.op),
                     "update_op out of range after deserialization");
          FUZZ_CHECK(is_valid(u.sop),
                     "scatter_op out of range after deserialization");
          FUZZ_CHECK(u.scatter || u.indices.empty(),
                     "rows on an update that is not a scatter");
          FUZZ_CHECK(!(u.scatter && u.alike), "a scatter marked alike");
          FUZZ_CHECK(u.staged == 0 || u.value.size() == 0,
                     "staged update with a host value after deserialization");
          check_tensor(u.value);
        }
        auto& c = report.collective;
        FUZZ_CHECK(is_valid(c.kind),
                   "step collective kind out of range after deserialization");
        FUZZ_CHECK(is_valid(c.op),
                   "step collective op out of range after deserialization");
        FUZZ_CHECK(c.root >= 0, "negative broadcast root after deserialization");
        FUZZ_CHECK(!report.suspended || report.updates.empty(),
                   "a suspended step report with updates");
        for (auto& x : c.values)
          check_tensor(x);
        (void) to_string(c.kind);
        if (report.suspended)
          check_rejects_corrupted(report, [pick](step_report& x) {
            if (pick % 2 == 0)
              x.collective.kind
                = out_of_range(step_collective_kind::broadcast, pick);
            else
              x.collective.op = out_of_range(reduce_op::prod, pick);
          });
        if (!report.updates.empty())
          check_rejects_corrupted(report, [pick](step_report& x) {
            auto& u = x.updates[pick % x.updates.size()];
            if (pick % 3 == 1 && u.value.size() != 0)
              u.staged = 1 + pick; // a staged id beside a host value
            else if (pick % 3 == 2)
              u.sop = out_of_range(scatter_op::max, pick);
            else
              u.op = out_of_range(update_op::assign_sub, pick);
          });
      }
      break;
    }
    case 4: {
      std::vector<tensor> xs;
      if (deserialize(data, size, xs))
        for (auto& x : xs)
          check_tensor(x);
      break;
    }
    case 5: {
      std::vector<variable_info> xs;
      if (deserialize(data, size, xs))
        for (auto& x : xs)
          check_info(x);
      break;
    }
    case 6: {
      sequenced_operation op;
      if (deserialize(data, size, op)) {
        FUZZ_CHECK(sequenceable(op.op),
                   "an operation the sequencer never orders was accepted");
        FUZZ_CHECK(op.origin >= -1, "origin below -1 after deserialization");
        FUZZ_CHECK(consistent(op), "deferred data the operation cannot have");
        (void) name_of(op.op);
        check_operation(op.op);
        FUZZ_CHECK(!op.deferred.present || payload_bytes(op.deferred) >= 0,
                   "deferred data of an impossible size accepted");
        check_rejects_corrupted(op, [pick](sequenced_operation& x) {
          switch (pick % 5) {
            case 4:
              x.deferred.present = true;
              x.deferred.shape = {-1 - static_cast<int64_t>(pick % 7)};
              break;
            case 0: x.op = ops::describe{}; break; // never sequenced
            case 1:
              x.op = ops::update{1, out_of_range(update_op::assign_sub, pick),
                                 {}};
              break;
            case 2:
              x.op = ops::scatter{1, out_of_range(scatter_op::max, pick), {}};
              break;
            default: {
              variable_spec spec;
              spec.agg = out_of_range(aggregation::only_first_replica, pick);
              x.op = ops::create{spec};
            }
          }
        });
      }
      break;
    }
    case 7: {
      strategy_metrics m;
      if (deserialize(data, size, m)) {
        for (auto& v : m.variables) {
          check_enums(v.sync, v.agg);
          FUZZ_CHECK(std::isfinite(v.collective_seconds)
                       && std::isfinite(v.waiting_seconds),
                     "seconds that are not finite after deserialization");
        }
        FUZZ_CHECK(std::isfinite(m.uptime_seconds)
                     && std::isfinite(m.stall_threshold_seconds),
                   "seconds that are not finite after deserialization");
        (void) to_json(m);
        (void) to_prometheus(m);
        (void) advise(m);
        if (!m.variables.empty())
          check_rejects_corrupted(m, [pick](strategy_metrics& x) {
            auto& v = x.variables[pick % x.variables.size()];
            if (pick % 2 == 0)
              v.sync = out_of_range(synchronization::on_read, pick);
            else
              v.agg = out_of_range(aggregation::only_first_replica, pick);
          });
      }
      break;
    }
    case 8: {
      replica_usage u;
      if (deserialize(data, size, u)) {
        FUZZ_CHECK(u.reads.size() == u.ids.size()
                     && u.updates.size() == u.ids.size(),
                   "replica_usage with unequal counts after deserialization");
        if (!u.ids.empty())
          check_rejects_corrupted(u, [](replica_usage& x) {
            x.reads.pop_back();
          });
      }
      break;
    }
  }
  return 0;
}
