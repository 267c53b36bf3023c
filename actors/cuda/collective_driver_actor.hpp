#pragma once
// The device collective driver of a strategy with CUDA replicas (CUDA backend
// only): a detached actor, so that it may wait for the GPUs without blocking a
// scheduler thread, that owns the strategy's cuda_collective (its NCCL clique
// and per-GPU streams) and runs each collective's work phase for every
// replica (sync/nccl/cuda_collective.hpp).

#include <vector>

#include <caf/expected.hpp>
#include <caf/fwd.hpp>

#include "actors/collective_driver.hpp"
#include "varsync/device_id.hpp"

namespace varsync {

caf::expected<collective_driver>
spawn_collective_driver(caf::actor_system& sys,
                        const std::vector<device_id>& devices);

} // namespace varsync
