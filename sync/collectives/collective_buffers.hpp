#pragma once
// Where one run of a collective finds the data its plan names, in this
// process: a pointer per replica to each item's input and component, the
// output, and (device collectives) each replica's step-done event. Bound in
// two places only: bind_plan_buffers() for the data the plan holds itself
// (contributions, the result tensor), and each replica at enter for its own
// memory (components, staged contributions), so that no plan and no message
// between processes ever carries a pointer.

#include <vector>

#include "core/bounded_wait.hpp"
#include "sync/collectives/collective_plan.hpp"

namespace varsync {

struct item_buffers {
  /// One per replica: its contribution or component data.
  std::vector<const void*> inputs;
  /// One per replica, target == components: its component data.
  std::vector<void*> components;
  /// target == output: the result's data.
  void* output = nullptr;
  /// Scatter items: one per replica, the elements of its component (the
  /// item's count is that of its rows), bound with the component at enter,
  /// for algorithms that copy whole components (staged_across_processes).
  std::vector<int64_t> component_elements;
};

struct collective_buffers {
  /// One per plan item.
  std::vector<item_buffers> items;
  /// Device collectives only (else empty): per replica, the event (a
  /// cudaEvent_t) that marks the end of its last step, published at enter;
  /// the collective's streams wait for it. Null for host replicas and
  /// replicas that ran no step yet.
  std::vector<void*> ready_events;
  /// When the operation that runs the collective must be answered: device
  /// collectives wait for their GPUs until then and abort past it
  /// (time_point::max(): no deadline).
  wait_clock::time_point deadline = wait_clock::time_point::max();
};

/// The buffers of `plan` that the plan holds itself: every contribution
/// tensor as its replica's input, every result as the output (taken
/// writable here, once, so that workers never touch its reference count).
/// The components and staged contributions are left for the replicas.
collective_buffers bind_plan_buffers(collective_plan& plan);

} // namespace varsync
