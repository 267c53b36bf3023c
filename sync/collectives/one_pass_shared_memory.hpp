#pragma once
// Host all-reduce among N in-process replicas in a single pass: worker k takes
// the k-th 1/N of the (fused) element space, reads that slice from every input,
// reduces it, and writes the result into that slice of every output. Traffic is
// 2·N·S bytes, the lower bound. The workers are the replicas themselves
// (collective_workers::replicas), so the slices run in parallel on the
// scheduler's threads; no replica touches the buffers while they run
// (replicas are quiesced between the enter and leave phases).
//
// Errors: an output item whose integer reduction overflows fails the
// collective (its output is unusable, nothing else depends on it); items
// that write components were checked by every replica at enter
// (sync/collectives/collective_checks.hpp), so the work phase never fails halfway.

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "sync/collectives/collective_algorithm.hpp"

namespace varsync {

/// The [begin, end) range of the fused element space that `worker` of
/// `num_workers` processes; boundaries aligned to 64 bytes of float32.
std::pair<int64_t, int64_t> worker_slice(int64_t total, int worker,
                                         int num_workers);

/// Runs `worker`'s slice of every item of `plan`. Returns the index of the
/// first output item whose integer reduction overflows in the slice, or -1.
int64_t one_pass_slice(const collective_plan& plan,
                       const collective_buffers& buffers, int worker,
                       int num_workers);

/// The algorithm of a strategy whose replicas are host replicas of one
/// process; `num_replicas` names it in its description.
std::shared_ptr<collective_algorithm> make_one_pass_shared_memory(
  int num_replicas);

} // namespace varsync
