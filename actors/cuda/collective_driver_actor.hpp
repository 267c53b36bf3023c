#pragma once
// The device collective driver of a strategy with CUDA replicas (CUDA backend
// only): a detached actor, so that it may wait for the GPUs without blocking a
// scheduler thread, that owns the strategy's cuda_collective (its NCCL clique
// and per-GPU streams) and runs each collective's work phase for every
// replica (sync/nccl/cuda_collective.hpp).

#include <string>
#include <vector>

#include <caf/expected.hpp>
#include <caf/fwd.hpp>

#include "devices/device_id.hpp"
#include "messages/collective_driver_interface.hpp"

namespace varsync {

struct collective_driver {
  collective_driver_actor actor;
  /// The path in words (strategy descriptions, logs).
  std::string description;
};

/// Creates the collective for `devices` (in the caller's thread: opening the
/// GPUs and the NCCL clique may take a while) and spawns its driver.
/// device_error if a GPU or the clique cannot be opened.
caf::expected<collective_driver>
spawn_collective_driver(caf::actor_system& sys,
                        const std::vector<device_id>& devices);

} // namespace varsync
