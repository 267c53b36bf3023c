#pragma once
// The description of one host collective: a list of fused items, each reducing
// N inputs (replica contributions, or the replicas' own components) and either
// applying the result to every replica's component or writing it to one output
// tensor. The coordinator builds the plan; each replica fills in its own
// component pointers when it enters the collective, then works on its slice.

#include <cstdint>
#include <string>
#include <vector>

#include <caf/error.hpp>

#include "varsync/tensor.hpp"
#include "varsync/synchronization.hpp"

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
  collective_source source = collective_source::contributions;
  collective_target target = collective_target::output;
  std::vector<tensor> contributions;
  /// One per replica (source == contributions): 0, or the id of the
  /// replica's staging buffer that holds its contribution in device memory
  /// (contributions[r] is then empty). The replica fills inputs[r] at enter;
  /// the collective may overwrite the buffer (it is released after the step).
  std::vector<uint64_t> staged;
  /// One per replica: contribution or component data (filled at enter).
  std::vector<const void*> inputs;
  /// One per replica for target == components (filled at enter).
  std::vector<void*> components;
  /// target == output: the result tensor and its data, taken writable once
  /// when the plan is built so that workers never touch its reference count.
  tensor result;
  void* output = nullptr;
};

struct collective_plan {
  /// The replicas of this process taking part (the slots of every item).
  int num_replicas = 0;
  /// The collective spans processes (sync/cross_process_collective.hpp):
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
  /// Device collectives only (sized by the coordinator, else empty): per
  /// replica, the event (a cudaEvent_t) that marks the end of the replica's
  /// last step, published at enter; the collective's streams wait for it.
  /// Null for host replicas and replicas that ran no step yet.
  std::vector<void*> ready_events;

  /// Creates an item with the per-replica slots sized for this plan.
  collective_item& add_item();
  /// Total elements over all items (the space the workers split).
  int64_t total_elements() const;
};

} // namespace varsync
