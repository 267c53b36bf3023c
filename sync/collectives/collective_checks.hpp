#pragma once
// The checks every collective makes before any component changes, whatever
// its algorithm: V4's integer overflow (each replica checks its own
// component at enter) and W4's equality of aggregation none's inputs.

#include <cstdint>
#include <span>

#include <caf/error.hpp>

#include "devices/host_kernels.hpp"
#include "sync/collectives/collective_buffers.hpp"
#include "sync/collectives/collective_plan.hpp"

namespace varsync {

/// The integer overflow check of one replica at enter: -1, or the index of
/// the first item with target components whose update of `component_of(k)`
/// (this replica's component of item k, in host memory) would overflow.
/// Scatter items ask `scatter_overflow(k, rows)` instead (the first
/// overflowing packed element of the rows `rows`, or -1), so that a device
/// component is read at its touched rows only. Read-only.
/// True if some replica's contribution to `item` stayed in a staging
/// buffer on its device. The replicas then leave V4 and W4 for the item to
/// the collective, which checks on the device (only collectives whose
/// checks_device_contributions() is true get such integer or aggregation
/// none items).
bool staged_on_device(const collective_item& item);

/// Items whose V4 check is the collective's (staged_on_device) are skipped.
template <class ComponentOf, class ScatterOverflow>
int64_t enter_overflow(const collective_plan& plan,
                       const collective_buffers& buffers,
                       ComponentOf component_of,
                       ScatterOverflow scatter_overflow) {
  for (size_t i = 0; i < plan.items.size(); ++i) {
    auto& item = plan.items[i];
    if (is_floating(item.type) || item.target != collective_target::components
        || staged_on_device(item))
      continue;
    std::span<const void* const> inputs{buffers.items[i].inputs};
    if (item.first_only)
      inputs = inputs.first(1);
    const bool bad
      = item.scatter
          ? scatter_overflow(i, inputs[0]) >= 0
          : host::first_overflow(item.rop, item.uop, item.type, inputs,
                                 component_of(i), 0, item.count)
              >= 0;
    if (bad)
      return static_cast<int64_t>(i);
  }
  return -1;
}

/// True if `replica`'s contribution to `item` is bitwise equal to replica 0's
/// (the check of aggregation none, W4).
bool inputs_equal(const collective_item& item, int replica);

/// V4: the error of `op` (an update or scatter op's name) on variable
/// `name` that overflows `type` at element `at` of replica `replica`'s
/// component.
caf::error update_overflow_error(const std::string& name, std::string_view op,
                                 dtype type, int64_t at, int replica);

/// The error for an output item `k` whose integer reduction does not fit
/// the dtype.
caf::error output_overflow_error(const collective_plan& plan, int64_t k);

} // namespace varsync
