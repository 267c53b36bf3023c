#include "sync/collectives/device_collective_registry.hpp"

#include <algorithm>
#include <atomic>
#include <set>

#include "devices/device.hpp"
#include "varsync/error.hpp"

namespace varsync {

bool needs_device_collective(std::span<const device_id> devices) {
  return std::any_of(devices.begin(), devices.end(), [](const device_id& d) {
    return d.kind != device_kind::host;
  });
}

bool one_gpu_per_replica(std::span<const device_id> devices) {
  std::set<int> gpus;
  for (auto& d : devices)
    if (d.kind == device_kind::cuda)
      gpus.insert(d.index);
  return gpus.size() == devices.size();
}

namespace {

std::atomic<device_collective_factory> factory{nullptr};
std::atomic<process_device_collective_factory> process_factory{nullptr};

// Names the first device replica, as opening it would.
caf::error no_backend(const std::vector<device_id>& devices) {
  auto d = std::find_if(devices.begin(), devices.end(), [](auto& x) {
    return x.kind != device_kind::host;
  });
  return cuda_backend_missing(d != devices.end() ? *d : device_id{});
}

} // namespace

void register_device_collective_factory(device_collective_factory fn) {
  factory.store(fn);
}

caf::expected<std::shared_ptr<collective_algorithm>>
make_device_collective(const std::vector<device_id>& devices) {
  if (auto fn = factory.load())
    return fn(devices);
  return no_backend(devices);
}

void register_process_device_collective_factory(
  process_device_collective_factory fn) {
  process_factory.store(fn);
}

caf::expected<std::shared_ptr<collective_algorithm>>
make_device_collective(process_membership membership,
                       const std::vector<device_id>& devices) {
  if (auto fn = process_factory.load())
    return fn(std::move(membership), devices);
  return no_backend(devices);
}

} // namespace varsync
