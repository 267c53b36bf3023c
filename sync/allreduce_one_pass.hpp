#pragma once
// Host all-reduce among N in-process replicas in a single pass: worker k takes
// the k-th 1/N of the (fused) element space, reads that slice from every input,
// reduces it, and writes the result into that slice of every output. Traffic is
// 2·N·S bytes, the lower bound. The caller guarantees that no replica touches
// the buffers while the workers run (replicas are quiesced between the enter
// and leave phases of a collective).

#include <cstdint>
#include <utility>

#include "sync/collective_plan.hpp"

namespace varsync {

/// The [begin, end) range of the fused element space that `worker` of
/// `num_workers` processes; boundaries aligned to 64 bytes of float32.
std::pair<int64_t, int64_t> worker_slice(int64_t total, int worker,
                                         int num_workers);

/// Runs `worker`'s slice of every item of `plan`.
void allreduce_one_pass(collective_plan& plan, int worker, int num_workers);

/// True if `replica`'s contribution to `item` is bitwise equal to replica 0's
/// (the check of aggregation none, W4).
bool inputs_equal(const collective_item& item, int replica);

} // namespace varsync
