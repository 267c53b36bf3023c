#pragma once
// The seam every bulk data movement of a strategy goes through: one
// algorithm per strategy, chosen once when the strategy is made
// (actors/collective_selection.cpp), one file per algorithm:
//
//   sync/collectives/one_pass_shared_memory   host replicas of one process
//   sync/collectives/across_processes         processes over a process group
//                                             (Gloo over TCP: sync/gloo/)
//   sync/collectives/staged_across_processes  the same, with CUDA replicas'
//                                             data staged through the host
//   sync/nccl/nccl_clique_collective          CUDA replicas on distinct GPUs
//   sync/nccl/nccl_across_processes_collective  NCCL over the processes
//   sync/nccl/same_gpu_collective             CUDA replicas sharing one GPU
//   sync/nccl/host_staging_collective         host and CUDA replicas mixed
//
// The transports sit below the algorithms (process_group, nccl::clique).
// An algorithm runs a plan (what to reduce and where the result goes, by
// name) over the buffers a run bound (sync/collectives/collective_buffers.hpp).

#include <cstdint>
#include <memory>
#include <string>

#include <caf/error.hpp>

#include "sync/collectives/collective_buffers.hpp"
#include "sync/collectives/collective_plan.hpp"

namespace varsync {

/// Who calls run().
enum class collective_workers : uint8_t {
  /// Every replica, on its own slice (worker = its slot, num_workers = the
  /// replicas of the process), in parallel on the scheduler's threads.
  replicas,
  /// One call for all replicas (worker 0 of 1), from a thread of the
  /// algorithm's own (the collective driver actor): its calls block, or
  /// must all be issued from one place (NCCL ranks inside one group).
  driver,
};

class collective_algorithm {
public:
  virtual ~collective_algorithm() = default;

  /// The algorithm in words, for strategy descriptions and logs.
  virtual const std::string& description() const = 0;

  virtual collective_workers workers() const = 0;

  /// True if the algorithm reads contributions that device replicas keep
  /// in staging buffers until their step is over (collective_item::staged).
  virtual bool uses_staging_buffers() const { return false; }

  /// True if the algorithm checks V4 and W4 on contributions that stayed
  /// on a device: device replicas then keep integer contributions and
  /// those of aggregation none in staging buffers too, instead of copying
  /// them to the host for the replicas' checks at enter.
  virtual bool checks_device_contributions() const { return false; }

  /// Runs `worker`'s part of `plan` on the data `buffers` binds; the
  /// replicas are quiesced (between enter and leave) meanwhile. Errors are
  /// varsync errors naming what failed; what an error leaves applied is the
  /// algorithm's contract (its header).
  virtual caf::error run(const collective_plan& plan,
                         collective_buffers& buffers, int worker,
                         int num_workers)
    = 0;
};

/// One run of a collective, as the coordinator hands it to the replicas and
/// the driver (in-process messages only).
struct collective_run {
  std::shared_ptr<collective_plan> plan;
  collective_buffers buffers;
  /// collective_workers::replicas: the algorithm the replicas run (kept
  /// alive by the run); null where the driver runs it.
  std::shared_ptr<collective_algorithm> algorithm;
};

} // namespace varsync
