#pragma once
// Where the device collectives come from: the CUDA backend (varsync::cuda)
// registers its factory when it is loaded, so that host-only programs never
// link CUDA or NCCL. Which device algorithm a device list gets (NCCL clique,
// same GPU, host staging) is the factory's choice, in one file
// (sync/nccl/cuda_collective_selection.cpp).

#include <memory>
#include <span>
#include <vector>

#include <caf/expected.hpp>

#include "sync/collectives/collective_algorithm.hpp"
#include "sync/transport/process_group.hpp"
#include "varsync/device_id.hpp"

namespace varsync {

/// True if the strategy over `devices` needs a device collective (some
/// replica is on a CUDA device).
bool needs_device_collective(std::span<const device_id> devices);

/// True if every replica of `devices` is a CUDA replica on a GPU of its
/// own (what NCCL needs of one process's replicas).
bool one_gpu_per_replica(std::span<const device_id> devices);

using device_collective_factory
  = caf::expected<std::shared_ptr<collective_algorithm>> (*)(
    const std::vector<device_id>& devices);

/// Registers (or, with nullptr, removes) the device collective's factory.
void register_device_collective_factory(device_collective_factory fn);

/// The device collective for `devices`; device_error when no backend
/// registered a factory.
caf::expected<std::shared_ptr<collective_algorithm>>
make_device_collective(const std::vector<device_id>& devices);

/// The same for a strategy across processes whose replicas in this process
/// (`devices`) include device replicas.
using process_device_collective_factory
  = caf::expected<std::shared_ptr<collective_algorithm>> (*)(
    process_membership membership, const std::vector<device_id>& devices);

void register_process_device_collective_factory(
  process_device_collective_factory fn);

caf::expected<std::shared_ptr<collective_algorithm>>
make_device_collective(process_membership membership,
                       const std::vector<device_id>& devices);

} // namespace varsync
