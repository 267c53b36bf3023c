#pragma once
// The collective of a strategy that has CUDA replicas: it runs a whole
// collective_plan (the fused ON_WRITE updates of a step, a cross-replica read
// of a large ON_READ variable, a cross-replica all_reduce) for every replica
// from one place, on one host thread, choosing the path from the strategy's
// device list (plan_cuda_collective):
//
//   nccl_clique         N distinct GPUs: one NCCL clique (created once);
//                       every rank's call issued inside one
//                       ncclGroupStart/End; step updates: contributions
//                       the replicas kept on their GPU (staging buffers,
//                       reduced in place; host values are copied to each
//                       GPU first), then one
//                       ncclAllReduce per dtype (all_reduce_batch) or per item
//                       (ncclBroadcast from replica 0 for only_first_replica
//                       and aggregation none), then the update kernel on every
//                       component; reads: ncclReduce to replica 0, then one
//                       device-to-host copy.
//   same_gpu            every replica on one GPU (NCCL refuses duplicate
//                       devices): the reduce_and_apply kernel over the
//                       replicas' staging buffers (host values copied to
//                       the GPU first; same_device_all_reduce); reads: the reduce
//                       kernel, then one device-to-host copy. Bit-identical to
//                       the host kernels.
//   mixed_host_cuda,    staged through host memory, explicitly: GPU inputs
//   same_gpu_then_nccl  are copied to the host, reduced there by the host
//                       kernels (the "one device" of "reduce on one device,
//                       then broadcast" is the host), and the result is
//                       copied to every GPU component and applied to every
//                       host component. Bit-identical to the host kernels.
//
// Items that neither read nor write components (strategy::all_reduce of host
// values) are reduced on the host by the host kernels on every path: their
// data is in host memory and so is their result.
//
// Ordering: the replicas are quiesced (between enter and leave) while run()
// works; before touching a replica's memory, the stream used for it waits for
// the replica's step-done event (plan.ready_events, cudaStreamWaitEvent, no
// host wait). run() waits for all its work before it returns.
//
// No CUDA or NCCL header here. Not thread-safe: one caller (the collective
// driver actor, actors/cuda/collective_driver_actor.hpp).

#include <memory>
#include <span>
#include <string>
#include <vector>

#include <caf/error.hpp>
#include <caf/expected.hpp>

#include "varsync/device_id.hpp"
#include "sync/collective_plan.hpp"
#include "sync/nccl/same_device_reduce.hpp"

namespace varsync {

class cuda_collective {
public:
  /// Opens one cuda_device per distinct GPU of `devices` (scratch memory and
  /// one stream per GPU) and, for the nccl_clique path, the NCCL clique.
  /// invalid_argument for a device list without CUDA devices; device_error
  /// (or out_of_memory) naming the CUDA / NCCL failure.
  static caf::expected<std::unique_ptr<cuda_collective>>
  create(std::vector<device_id> devices);

  ~cuda_collective();
  cuda_collective(const cuda_collective&) = delete;
  cuda_collective& operator=(const cuda_collective&) = delete;

  /// Runs every item of `plan` (whose pointers the replicas filled in at
  /// enter) and waits for the GPUs. A device failure halfway leaves the
  /// items before it applied: it is a device_error, not a validation error.
  caf::error run(collective_plan& plan);

  const cuda_collective_plan& topology() const;
  /// The path in words, as strategy descriptions report it.
  const std::string& description() const;

  struct impl;

private:
  explicit cuda_collective(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
};

/// The description of the collective a strategy over `plan`'s devices uses,
/// naming where data is staged through host memory.
std::string describe_device_collective(const cuda_collective_plan& plan);

} // namespace varsync
