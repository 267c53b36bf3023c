#pragma once
// Internal: what a replica answers a step with, the ON_WRITE updates it
// recorded in issue order and the collective it waits in (the protocol
// between replicas and the coordinator; varsync/step_task.hpp is the
// user's side).

#include <cstdint>
#include <string_view>
#include <vector>

#include <caf/error.hpp>
#include <caf/meta/load_callback.hpp>
#include <caf/sec.hpp>
#include <caf/meta/type_name.hpp>

#include "varsync/tensor.hpp"
#include "varsync/internal/tensor_inspect.hpp"
#include "varsync/variable.hpp"
#include "varsync/synchronization.hpp"

namespace varsync {

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
  /// Every replica contributed the same value by construction
  /// (replica_context::update_mirrored): replica 0's value is applied to
  /// every component, whatever the variable's aggregation.
  bool alike = false;
};

/// The name of u's operation ("assign_add", "scatter_sub", ...).
inline std::string_view op_name(const recorded_update& u) {
  return u.scatter ? to_string(u.sop) : to_string(u.op);
}

/// The collectives a coroutine step can reach (X1-X5).
enum class step_collective_kind : uint8_t {
  all_reduce = 0,
  all_gather = 1,
  broadcast = 2,
};

constexpr bool is_valid(step_collective_kind x) {
  return static_cast<uint8_t>(x)
         <= static_cast<uint8_t>(step_collective_kind::broadcast);
}

constexpr std::string_view to_string(step_collective_kind x) {
  switch (x) {
    case step_collective_kind::all_reduce: return "all_reduce";
    case step_collective_kind::all_gather: return "all_gather";
    case step_collective_kind::broadcast: return "broadcast";
  }
  return "?";
}

/// Where a replica's step waits: the collective and its contribution.
struct step_collective {
  step_collective_kind kind = step_collective_kind::all_reduce;
  /// all_reduce: the reduction.
  reduce_op op = reduce_op::sum;
  /// all_gather: the axis along which the replicas' values are joined
  /// (negative: from the end).
  int64_t axis = 0;
  /// broadcast: the replica whose values every replica receives.
  int32_t root = 0;
  /// The contribution: one or several tensors, combined tensor by tensor
  /// in one collective.
  std::vector<tensor> values;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, step_collective& x) {
  auto load = caf::meta::load_callback([&]() -> caf::error {
    if (!is_valid(x.kind) || !is_valid(x.op) || x.root < 0)
      return caf::sec::invalid_argument;
    return caf::none;
  });
  return f(caf::meta::type_name("varsync::step_collective"), x.kind, x.op,
           x.axis, x.root, x.values, load);
}

struct step_report {
  std::vector<recorded_update> updates;
  /// A coroutine step waits at `collective`: the replica resumes it with
  /// the result (step_resume) or abandons it (step_abort); `updates` is
  /// empty until the step ends.
  bool suspended = false;
  step_collective collective;
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
    if (x.scatter && (x.staged != 0 || x.alike))
      return caf::sec::invalid_argument;
    // A staged contribution carries no host value.
    if (x.staged != 0 && x.value.size() != 0)
      return caf::sec::invalid_argument;
    return caf::none;
  });
  return f(caf::meta::type_name("varsync::recorded_update"), x.variable_id,
           x.op, x.value, x.staged, x.scatter, x.sop, x.indices, x.alike,
           load);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, step_report& x) {
  auto load = caf::meta::load_callback([&]() -> caf::error {
    if (x.suspended && !x.updates.empty())
      return caf::sec::invalid_argument;
    return caf::none;
  });
  return f(caf::meta::type_name("varsync::step_report"), x.updates,
           x.suspended, x.collective, load);
}

} // namespace varsync
