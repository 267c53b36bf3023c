#pragma once
// The collective of a strategy across processes whose replicas here are
// CUDA replicas, each on a GPU of its own: one NCCL communicator over every
// replica of every process (ncclCommInitRank per local GPU; process 0's
// ncclGetUniqueId broadcast over the process group), joined by every
// process at its first collective.
//
//   - Step updates of floating variables (contributions -> components,
//     no aggregation none) take NCCL: the agreement round over the process
//     group, then the NCCL clique algorithm on device buffers
//     (sync/nccl/device_collective.hpp; mean divides by every replica).
//   - Everything else (integers, aggregation none, reads, gathers, failed
//     rounds) runs `staged`: staged through host memory over Gloo.
//   - Before joining, the processes compare their GPUs (host and PCI bus
//     id): a GPU used by two processes (NCCL refuses that), more than 16
//     local GPUs, or a join that fails anywhere makes every process keep
//     the staged algorithm for everything, with a warning.
//
// The choice depends on the plan alone, so processes that agree choose
// alike. Blocking: run by the driver. Compiled everywhere; NCCL across
// processes needs two GPUs at least (not run yet: docs/cuda.md).

#include <memory>

#include "sync/collectives/collective_algorithm.hpp"
#include "sync/nccl/same_device_reduce.hpp"
#include "sync/transport/process_group.hpp"

namespace varsync {

std::shared_ptr<collective_algorithm>
make_nccl_across_processes(process_membership membership,
                           cuda_collective_plan topo,
                           std::shared_ptr<collective_algorithm> staged);

/// True if `plan` takes NCCL (the first bullet above).
bool nccl_takes(const collective_plan& plan);

} // namespace varsync
