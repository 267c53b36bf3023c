#pragma once
// A cross-replica operation of services mode (cluster_mode::services) as it
// travels to process 0's sequencer and back to every process: plain data
// (no closure), so that it crosses processes over CAF's network layer. The
// sequencer numbers the operations; every process applies them in that
// order (W8 across processes, P2).

#include <cstdint>
#include <string>
#include <vector>

#include <caf/meta/load_callback.hpp>
#include <caf/meta/type_name.hpp>
#include <caf/sec.hpp>

#include "varsync/scatter.hpp"
#include "varsync/synchronization.hpp"
#include "varsync/tensor.hpp"
#include "varsync/tensor_inspect.hpp"
#include "varsync/variable_info.hpp"

namespace varsync {

enum class sequenced_kind : uint8_t {
  create = 0,
  lookup,
  list,
  destroy,
  read,
  update,
  /// This process's components (strategy::local_values).
  local_values,
  /// Every replica's component, from every process (strategy::all_values).
  all_values,
  /// A cross-replica scatter (S4).
  scatter,
};

constexpr bool is_valid(sequenced_kind x) {
  return static_cast<uint8_t>(x)
         <= static_cast<uint8_t>(sequenced_kind::scatter);
}

constexpr const char* to_string(sequenced_kind kind) {
  constexpr const char* names[] = {"create", "lookup", "list", "destroy",
                                   "read", "update", "local_values",
                                   "all_values", "scatter"};
  return is_valid(kind) ? names[static_cast<uint8_t>(kind)] : "unknown";
}

struct sequenced_operation {
  /// Set by the sequencer: the operation's place in the one order.
  uint64_t sequence = 0;
  /// Set by the sequencer: the rank that issued it (its caller waits there).
  int32_t origin = -1;
  /// The issuing process's number for the waiting caller.
  uint64_t ticket = 0;
  sequenced_kind kind = sequenced_kind::read;
  /// destroy, read, update, local_values, all_values.
  uint64_t variable = 0;
  /// lookup.
  std::string name;
  /// update.
  update_op op = update_op::assign;
  /// update, scatter (its rows' values).
  tensor value;
  /// scatter.
  scatter_op sop = scatter_op::update;
  std::vector<int64_t> indices;
  /// create (its initial value included).
  variable_spec spec;
};

inline sequenced_operation make_sequenced(sequenced_kind kind,
                                          uint64_t variable = 0) {
  sequenced_operation op;
  op.kind = kind;
  op.variable = variable;
  return op;
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, sequenced_operation& x) {
  // V4: an enum byte outside its range never leaves deserialization.
  auto load = caf::meta::load_callback([&]() -> caf::error {
    if (!is_valid(x.kind) || !is_valid(x.op) || !is_valid(x.sop)
        || x.origin < -1)
      return caf::sec::invalid_argument;
    return caf::none;
  });
  return f(caf::meta::type_name("varsync::sequenced_operation"), x.sequence,
           x.origin, x.ticket, x.kind, x.variable, x.name, x.op, x.value,
           x.sop, x.indices, x.spec, load);
}

} // namespace varsync
