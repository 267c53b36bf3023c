#pragma once
// The device collective driver of a strategy with device replicas, as the
// coordinator sees it. The host library only knows the interface; the CUDA
// backend (varsync::cuda) registers the spawner when it is loaded, so that
// host-only programs never link CUDA or NCCL.

#include <string>
#include <vector>

#include <caf/expected.hpp>
#include <caf/fwd.hpp>

#include "messages/collective_driver_interface.hpp"
#include "varsync/device_id.hpp"

namespace varsync {

struct collective_driver {
  collective_driver_actor actor;
  /// The path in words (strategy descriptions, logs).
  std::string description;
};

using collective_driver_spawner = caf::expected<collective_driver> (*)(
  caf::actor_system& sys, const std::vector<device_id>& devices);

/// Registers (or, with nullptr, removes) the device collective's spawner.
void register_collective_driver_spawner(collective_driver_spawner fn);

/// Spawns the device collective driver for `devices`; device_error when no
/// backend registered one.
caf::expected<collective_driver>
spawn_device_collective_driver(caf::actor_system& sys,
                               const std::vector<device_id>& devices);

} // namespace varsync
