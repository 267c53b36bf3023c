#include "actors/collective_driver.hpp"

#include <atomic>

#include "varsync/error.hpp"

namespace varsync {

namespace {

std::atomic<collective_driver_spawner> spawner{nullptr};

} // namespace

void register_collective_driver_spawner(collective_driver_spawner fn) {
  spawner.store(fn);
}

caf::expected<collective_driver>
spawn_device_collective_driver(caf::actor_system& sys,
                               const std::vector<device_id>& devices) {
  if (auto fn = spawner.load())
    return fn(sys, devices);
  return make_error(errc::device_error,
                    "device replicas need the CUDA backend: link varsync::cuda "
                    "(find_package(varsync COMPONENTS cuda)), built with "
                    "VARSYNC_CUDA=ON");
}

} // namespace varsync
