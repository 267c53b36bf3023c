#pragma once
// A replica step travels to every replica as a shared, type-erased function;
// each replica answers with the ON_WRITE updates it recorded, in issue order.

#include <cstdint>
#include <memory>
#include <vector>

#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/error.hpp>
#include <caf/meta/load_callback.hpp>
#include <caf/sec.hpp>
#include <caf/meta/type_name.hpp>

#include "varsync/tensor.hpp"
#include "varsync/tensor_inspect.hpp"
#include "varsync/scatter.hpp"
#include "varsync/synchronization.hpp"

namespace varsync {

class replica_context;

/// The user function of `run`, executed once on every replica. `run` is
/// called on replica r's actor with replica r's context.
class replica_step {
public:
  virtual ~replica_step() = default;
  virtual void run(replica_context& ctx) = 0;
};

using replica_step_ptr = std::shared_ptr<replica_step>;

struct recorded_update {
  uint64_t variable_id = 0;
  update_op op = update_op::assign;
  /// The contribution, in host memory; empty when `staged` is set.
  tensor value;
  /// Nonzero: the contribution stayed in the replica's device memory, in the
  /// staging buffer with this id (ids are the replica's own; the replica
  /// publishes the pointer when it enters the step's collective).
  uint64_t staged = 0;
  /// A sparse update (S1): `sop` applied to the rows `indices` of the
  /// variable, `value` holding one row per index ([k, d1, ...]); `op` is
  /// unused.
  bool scatter = false;
  scatter_op sop = scatter_op::update;
  std::vector<int64_t> indices = {};
};

/// The name of u's operation ("assign_add", "scatter_sub", ...).
inline std::string_view op_name(const recorded_update& u) {
  return u.scatter ? to_string(u.sop) : to_string(u.op);
}

struct step_report {
  std::vector<recorded_update> updates;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, recorded_update& x) {
  // V4: an update op outside its range never leaves deserialization.
  auto load = caf::meta::load_callback([&]() -> caf::error {
    if (!is_valid(x.op) || !is_valid(x.sop))
      return caf::sec::invalid_argument;
    // Only a scatter names rows, and it always carries its rows' values.
    if (!x.scatter && !x.indices.empty())
      return caf::sec::invalid_argument;
    if (x.scatter && x.staged != 0)
      return caf::sec::invalid_argument;
    // A staged contribution carries no host value.
    if (x.staged != 0 && x.value.size() != 0)
      return caf::sec::invalid_argument;
    return caf::none;
  });
  return f(caf::meta::type_name("varsync::recorded_update"), x.variable_id,
           x.op, x.value, x.staged, x.scatter, x.sop, x.indices, load);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, step_report& x) {
  return f(caf::meta::type_name("varsync::step_report"), x.updates);
}

} // namespace varsync

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(varsync::replica_step_ptr)
