#pragma once
// An operation of a strategy as one value: what the actor API, the async and
// blocking APIs, checkpoints and services mode's sequencer all hand to the
// coordinator's one dispatch (actors/coordinator/coordinator_dispatch.cpp). Each member
// names its result type and its name for messages; each has `inspect` beside
// it, so that the operations services mode orders cross processes as they
// are. A step's function and the in-process queries never cross a process:
// loading one fails.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include <caf/error.hpp>
#include <caf/meta/load_callback.hpp>
#include <caf/meta/type_name.hpp>
#include <caf/sec.hpp>

#include "messages/atoms.hpp"
#include "messages/shared_variable_info.hpp"
#include "varsync/ext/metrics.hpp"
#include "varsync/variable.hpp"
#include "varsync/internal/step_report.hpp"
#include "varsync/step_task.hpp"
#include "varsync/strategy_description.hpp"
#include "varsync/synchronization.hpp"
#include "varsync/tensor.hpp"
#include "varsync/internal/tensor_inspect.hpp"
#include "varsync/variable.hpp"

namespace varsync::ops {

// Defines inspect for an operation: its fields and, when loading, `valid`.
#define VARSYNC_OPERATION_INSPECT(type, valid, ...)                            \
  template <class Inspector>                                                   \
  typename Inspector::result_type inspect(Inspector& f, type& x) {             \
    auto load = caf::meta::load_callback([&x]() -> caf::error {                \
      (void) x;                                                                \
      return (valid) ? caf::error{} : caf::sec::invalid_argument;              \
    });                                                                        \
    return f(caf::meta::type_name("varsync::ops::" #type), ##__VA_ARGS__,      \
             load);                                                            \
  }

struct create {
  using result = shared_variable_info;
  static constexpr const char* name = "create";
  variable_spec spec;
};
VARSYNC_OPERATION_INSPECT(create, is_valid(x.spec.sync) && is_valid(x.spec.agg),
                          x.spec)

struct lookup {
  using result = shared_variable_info;
  static constexpr const char* name = "lookup";
  std::string variable_name;
};
VARSYNC_OPERATION_INSPECT(lookup, true, x.variable_name)

struct list {
  using result = std::vector<variable_info>;
  static constexpr const char* name = "list";
};
VARSYNC_OPERATION_INSPECT(list, true)

struct destroy {
  using result = ok_atom;
  static constexpr const char* name = "destroy";
  uint64_t variable = 0;
};
VARSYNC_OPERATION_INSPECT(destroy, true, x.variable)

struct read {
  using result = tensor;
  static constexpr const char* name = "read";
  uint64_t variable = 0;
};
VARSYNC_OPERATION_INSPECT(read, true, x.variable)

struct update {
  using result = ok_atom;
  static constexpr const char* name = "update";
  uint64_t variable = 0;
  update_op how = update_op::assign;
  tensor value;
};
VARSYNC_OPERATION_INSPECT(update, is_valid(x.how), x.variable, x.how, x.value)

/// S4: a cross-replica scatter.
struct scatter {
  using result = ok_atom;
  static constexpr const char* name = "scatter";
  uint64_t variable = 0;
  scatter_op how = scatter_op::update;
  indexed_slices slices;
};
VARSYNC_OPERATION_INSPECT(scatter, is_valid(x.how), x.variable, x.how,
                          x.slices)

/// This process's components (strategy::local_values).
struct local_values {
  using result = std::vector<tensor>;
  static constexpr const char* name = "local_values";
  uint64_t variable = 0;
};
VARSYNC_OPERATION_INSPECT(local_values, true, x.variable)

/// Every replica's component, from every process (strategy::all_values).
struct all_values {
  using result = std::vector<tensor>;
  static constexpr const char* name = "all_values";
  uint64_t variable = 0;
};
VARSYNC_OPERATION_INSPECT(all_values, true, x.variable)

/// The components of the replicas that have not failed.
struct survivor_values {
  using result = std::vector<std::optional<tensor>>;
  static constexpr const char* name = "survivor_values";
  uint64_t variable = 0;
};
VARSYNC_OPERATION_INSPECT(survivor_values, true, x.variable)

/// A step: its function lives in this process only.
struct run {
  using result = ok_atom;
  static constexpr const char* name = "run";
  replica_step_ptr step;
};
VARSYNC_OPERATION_INSPECT(run, false)

struct all_reduce {
  using result = std::vector<tensor>;
  static constexpr const char* name = "all_reduce";
  reduce_op how = reduce_op::sum;
  /// Each local replica's values.
  std::vector<std::vector<tensor>> values;
};
VARSYNC_OPERATION_INSPECT(all_reduce, is_valid(x.how), x.how, x.values)

struct describe {
  using result = strategy_description;
  static constexpr const char* name = "describe";
};
VARSYNC_OPERATION_INSPECT(describe, false)

/// A snapshot of the metrics (M1-M4).
struct metrics {
  using result = strategy_metrics;
  static constexpr const char* name = "metrics";
};
VARSYNC_OPERATION_INSPECT(metrics, false)

/// The processes agree on an outcome (P15): each contributes `local` (its
/// error or none), every process gets its own error or the first other.
struct agree {
  using result = ok_atom;
  static constexpr const char* name = "agree";
  std::string what;
  caf::error local;
};
VARSYNC_OPERATION_INSPECT(agree, false, x.what, x.local)

/// Answers when a variable of this name exists here (C10).
struct wait_for {
  using result = shared_variable_info;
  static constexpr const char* name = "wait_for";
  std::string variable_name;
};
VARSYNC_OPERATION_INSPECT(wait_for, false, x.variable_name)

/// Answers when every process has reached its barrier of the same number
/// (P14).
struct barrier {
  using result = ok_atom;
  static constexpr const char* name = "barrier";
};
VARSYNC_OPERATION_INSPECT(barrier, true)

/// M9: every process's metrics snapshot, in rank order: a collective
/// across processes (P4), ordered like any operation in services mode.
struct metrics_of_processes {
  using result = std::vector<strategy_metrics>;
  static constexpr const char* name = "metrics_of_processes";
};
VARSYNC_OPERATION_INSPECT(metrics_of_processes, true)

#undef VARSYNC_OPERATION_INSPECT

} // namespace varsync::ops

namespace varsync {

using operation
  = std::variant<ops::create, ops::lookup, ops::list, ops::destroy, ops::read,
                 ops::update, ops::scatter, ops::local_values, ops::all_values,
                 ops::survivor_values, ops::run, ops::all_reduce,
                 ops::describe, ops::metrics, ops::agree, ops::wait_for,
                 ops::barrier, ops::metrics_of_processes>;

template <class Op>
using result_of = typename Op::result;

/// The operation's name, for messages ("read", "update", ...).
const char* name_of(const operation& op);

/// The bytes of tensors the operation carries (counted while it waits for
/// admission, V3).
size_t tensor_bytes(const operation& op);

/// Whether services mode's sequencer orders `op` (the others run in the
/// process that issued them, or are agreed in training mode).
bool sequenceable(const operation& op);

namespace detail {

struct operation_saver {
  uint8_t& tag;
  operation& x;
};

struct operation_loader {
  uint8_t& tag;
  operation& x;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, operation_saver& s) {
  return std::visit([&f](auto& alternative) { return f(alternative); }, s.x);
}

template <size_t I, class Inspector>
typename Inspector::result_type load_alternative(Inspector& f,
                                                 operation_loader& l) {
  if constexpr (I == std::variant_size_v<operation>) {
    // V4: a tag no operation has never leaves deserialization.
    return caf::sec::invalid_argument;
  } else {
    if (l.tag == I)
      return f(l.x.template emplace<I>());
    return load_alternative<I + 1>(f, l);
  }
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, operation_loader& l) {
  return load_alternative<0>(f, l);
}

} // namespace detail

} // namespace varsync

// Found by argument-dependent lookup: the alternatives live in varsync::ops.
namespace varsync::ops {

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, operation& x) {
  uint8_t tag = static_cast<uint8_t>(x.index());
  if constexpr (Inspector::writes_state) {
    varsync::detail::operation_loader loader{tag, x};
    return f(caf::meta::type_name("varsync::operation"), tag, loader);
  } else {
    varsync::detail::operation_saver saver{tag, x};
    return f(caf::meta::type_name("varsync::operation"), tag, saver);
  }
}

} // namespace varsync::ops
