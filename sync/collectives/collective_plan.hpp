#pragma once
// The description of one collective: a list of fused items, each reducing N
// inputs (replica contributions, or the replicas' own components) and either
// applying the result to every replica's component or writing it to one output
// tensor. A plan names its data (variable ids, staging buffer ids, tensors it
// holds) and never points into a replica's memory: it is a value that could be
// serialized (inspect below). Where the named data lies in this process is the
// run's business (sync/collectives/collective_buffers.hpp); the algorithm that moves it is
// chosen once per strategy (sync/collectives/collective_algorithm.hpp).

#include <cstdint>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <caf/error.hpp>
#include <caf/meta/load_callback.hpp>
#include <caf/meta/type_name.hpp>
#include <caf/sec.hpp>

#include "varsync/variable.hpp"
#include "varsync/synchronization.hpp"
#include "varsync/tensor.hpp"
#include "varsync/internal/tensor_inspect.hpp"

namespace varsync {

enum class collective_target : uint8_t {
  /// c_r = uop(c_r, y) for the component c_r of every replica r.
  components,
  /// result = y, one output tensor.
  output,
};

enum class collective_source : uint8_t {
  /// The inputs are `contributions` (immutable tensors, one per replica).
  contributions,
  /// The inputs are the replicas' components of `variable_id`.
  components,
};

constexpr bool is_valid(collective_target x) {
  return x <= collective_target::output;
}

constexpr bool is_valid(collective_source x) {
  return x <= collective_source::components;
}

struct collective_item {
  uint64_t variable_id = 0;
  /// The variable's name, for errors of collectives across processes
  /// (empty in one process, where the coordinator names variables).
  std::string name;
  dtype type = dtype::float32;
  int64_t count = 0;
  reduce_op rop = reduce_op::sum;
  /// y = input 0 (only_first_replica; aggregation none once all inputs match).
  bool first_only = false;
  /// Aggregation none: the update fails unless all inputs are bitwise equal.
  bool require_equal = false;
  update_op uop = update_op::assign;
  /// target == components: the components hold equal values (ON_WRITE), so
  /// the new value can be computed from component 0 and stored to all.
  bool mirrored = false;
  /// Across processes, source == components and target == output: the
  /// result is every replica's component in replica id order (the output
  /// holds the total number of replicas times `count` elements), nothing is
  /// reduced.
  bool gather = false;
  /// A sparse update (S1): input 0 holds rows.size() rows of row_elems
  /// elements (count = both multiplied), this process's replicas' rows
  /// combined already, and c_r[rows[j]] = sop(c_r[rows[j]], row j) for every
  /// component (target components). The rows are ascending and distinct,
  /// so workers may split them, except where scatter_mul / scatter_div keep
  /// a repeated row (S5: one worker applies such an item, in order). Across
  /// processes, rop / first_only / require_equal say how the processes'
  /// rows combine (their counts differ: the processes exchange them first).
  bool scatter = false;
  /// Across processes, >= 0: no input is reduced; the result (target
  /// output) is process `from_process`'s `result` as it was when the run
  /// started, broadcast to every process (the bulk data of an operation of
  /// services mode, which does not travel over CAF: messages/
  /// sequenced_operation.hpp). -1: an ordinary item.
  int32_t from_process = -1;
  scatter_op sop = scatter_op::update;
  std::vector<int64_t> rows;
  int64_t row_elems = 0;
  collective_source source = collective_source::contributions;
  collective_target target = collective_target::output;
  /// source == contributions: one per replica (empty where `staged` names
  /// the replica's contribution instead).
  std::vector<tensor> contributions;
  /// One per replica (source == contributions): 0, or the id of the
  /// replica's staging buffer that holds its contribution in device memory.
  /// The collective may overwrite the buffer (it is released after the
  /// step).
  std::vector<uint64_t> staged;
  /// target == output: the result tensor.
  tensor result;
};

struct collective_plan {
  /// The replicas of this process taking part (the slots of every item).
  int num_replicas = 0;
  /// The collective spans processes (sync/collectives/across_processes.hpp):
  /// the replicas leave integer overflow checks to it.
  bool cross_process = false;
  /// Across processes: the replicas of every process (gather outputs).
  int total_replicas = 0;
  /// Across processes: what the operation is, in words, for the agreement
  /// of the processes and its errors ("step 3: 'w' assign_add, ...").
  std::string description;
  /// Across processes: the operation failed in this process before its
  /// data moved; the collective still takes part so that every process
  /// fails it alike (no items).
  caf::error local_error;
  std::vector<collective_item> items;
  /// Across processes: told each stage the processes passed ("agreed",
  /// "data", "voted"), on the collective's thread (the flight recorder,
  /// M7). Not sent anywhere.
  std::function<void(const char*)> on_phase;
  /// Across processes, a plan with no items: what this process states in
  /// the agreement round beside its fingerprint (`mine`, at most
  /// small_payload_limit bytes), and once the round passed what every
  /// process stated (`all`, rank order, each the whole payload area).
  /// Services mode's group commit (P17). Not sent anywhere.
  struct statements {
    std::vector<std::byte> mine;
    std::vector<std::vector<std::byte>> all;
  };
  std::shared_ptr<statements> stated;

  /// Creates an item with the per-replica slots sized for this plan.
  collective_item& add_item();
  /// Total elements over all items (the space the workers split).
  int64_t total_elements() const;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, collective_item& x) {
  auto load = caf::meta::load_callback([&]() -> caf::error {
    if (!is_valid(x.type) || !is_valid(x.rop) || !is_valid(x.uop)
        || !is_valid(x.source) || !is_valid(x.target) || x.count < 0
        || !is_valid(x.sop))
      return caf::sec::invalid_argument;
    if (x.scatter
        && (x.target != collective_target::components || x.row_elems < 0
            || x.count != static_cast<int64_t>(x.rows.size()) * x.row_elems))
      return caf::sec::invalid_argument;
    if (!x.scatter && !x.rows.empty())
      return caf::sec::invalid_argument;
    if (x.from_process < -1
        || (x.from_process >= 0
            && (x.target != collective_target::output || x.scatter
                || x.gather || x.first_only || x.require_equal)))
      return caf::sec::invalid_argument;
    return caf::none;
  });
  return f(caf::meta::type_name("varsync::collective_item"), x.variable_id,
           x.name, x.type, x.count, x.rop, x.first_only, x.require_equal,
           x.uop, x.mirrored, x.gather, x.scatter, x.from_process, x.sop,
           x.rows, x.row_elems,
           x.source, x.target, x.contributions,
           x.staged, x.result, load);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, collective_plan& x) {
  auto load = caf::meta::load_callback([&]() -> caf::error {
    if (x.num_replicas < 0 || x.total_replicas < 0)
      return caf::sec::invalid_argument;
    for (auto& item : x.items)
      if (item.staged.size() != static_cast<size_t>(x.num_replicas))
        return caf::sec::invalid_argument;
    return caf::none;
  });
  return f(caf::meta::type_name("varsync::collective_plan"), x.num_replicas,
           x.cross_process, x.total_replicas, x.description, x.local_error,
           x.items, load);
}

} // namespace varsync
