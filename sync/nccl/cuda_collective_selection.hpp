#pragma once
// Which device collective a strategy with CUDA replicas gets, from its
// device list (plan_cuda_collective): the one place that switches on the
// CUDA topology. Registered with the host library by the CUDA backend
// (sync/collectives/device_collective_registry.hpp).

#include <memory>
#include <vector>

#include <caf/expected.hpp>

#include "sync/collectives/collective_algorithm.hpp"
#include "sync/transport/process_group.hpp"
#include "varsync/device_id.hpp"

namespace varsync {

/// invalid_argument for a device list without CUDA devices; device_error
/// (or out_of_memory) naming the CUDA / NCCL failure.
caf::expected<std::shared_ptr<collective_algorithm>>
make_cuda_collective(const std::vector<device_id>& devices);

/// The device collective of a strategy across processes: NCCL across the
/// processes where every CUDA replica here is on a GPU of its own
/// (sync/nccl/nccl_across_processes_collective.hpp), else staged through
/// host memory (sync/collectives/staged_across_processes.hpp).
caf::expected<std::shared_ptr<collective_algorithm>>
make_cuda_collective(process_membership membership,
                     const std::vector<device_id>& devices);

} // namespace varsync
