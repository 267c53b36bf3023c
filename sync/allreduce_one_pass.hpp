#pragma once
// Host all-reduce among N in-process replicas in a single pass: worker k takes
// the k-th 1/N of the (fused) element space, reads that slice from every input,
// reduces it, and writes the result into that slice of every output. Traffic is
// 2·N·S bytes, the lower bound. The caller guarantees that no replica touches
// the buffers while the workers run (replicas are quiesced between the enter
// and leave phases of a collective).

#include <cstdint>
#include <utility>

#include <span>

#include "devices/host_kernels.hpp"
#include <caf/error.hpp>

#include "sync/collective_plan.hpp"

namespace varsync {

/// The [begin, end) range of the fused element space that `worker` of
/// `num_workers` processes; boundaries aligned to 64 bytes of float32.
std::pair<int64_t, int64_t> worker_slice(int64_t total, int worker,
                                         int num_workers);

/// Runs `worker`'s slice of every item of `plan`. Returns the index of the
/// first item with target output whose integer reduction overflows in the
/// slice (its output is then unusable), or -1. Items that write components
/// are checked at enter (enter_overflow), before any worker writes.
int64_t allreduce_one_pass(collective_plan& plan, int worker, int num_workers);

/// The error for an allreduce_one_pass result k >= 0 (an output item whose
/// integer reduction does not fit the dtype).
caf::error output_overflow_error(const collective_plan& plan, int64_t k);

/// The integer overflow check of one replica at enter: -1, or the index of
/// the first item with target components whose update of `component_of(item)`
/// (this replica's component) would overflow. Read-only.
template <class ComponentOf>
int64_t enter_overflow(const collective_plan& plan, ComponentOf component_of);

/// True if `replica`'s contribution to `item` is bitwise equal to replica 0's
/// (the check of aggregation none, W4).
bool inputs_equal(const collective_item& item, int replica);

template <class ComponentOf>
int64_t enter_overflow(const collective_plan& plan, ComponentOf component_of) {
  for (size_t i = 0; i < plan.items.size(); ++i) {
    auto& item = plan.items[i];
    if (is_floating(item.type) || item.target != collective_target::components)
      continue;
    std::span<const void* const> inputs{item.inputs};
    if (item.first_only)
      inputs = inputs.first(1);
    if (host::first_overflow(item.rop, item.uop, item.type, inputs,
                             component_of(item), 0, item.count)
        >= 0)
      return static_cast<int64_t>(i);
  }
  return -1;
}

} // namespace varsync
