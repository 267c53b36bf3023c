#pragma once
// The collective a strategy uses to move bulk data, chosen from its device
// list, in words for strategy descriptions and logs: the host one-pass
// collective for host replicas; with the CUDA backend, the NCCL clique, the
// same-GPU path or host staging (sync/nccl/cuda_collective.hpp, registered
// by varsync::cuda).

#include <span>
#include <string>

#include "varsync/device_id.hpp"

namespace varsync {

/// True if the strategy over `devices` needs the device collective (some
/// replica is on a CUDA device).
bool needs_device_collective(std::span<const device_id> devices);

/// "host one-pass shared-memory all-reduce (2 in-process replicas)",
/// "nccl clique over 2 GPUs (...)", "device copies on one GPU (...)", ...
std::string describe_collective(std::span<const device_id> devices);

/// Describes the device collective for a device list; registered by the
/// CUDA backend when it is loaded.
using device_collective_describer = std::string (*)(std::span<const device_id>);
void register_device_collective_describer(device_collective_describer fn);

} // namespace varsync
