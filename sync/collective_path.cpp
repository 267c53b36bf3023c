#include "sync/collective_path.hpp"

#include <algorithm>
#include <atomic>

namespace varsync {

bool needs_device_collective(std::span<const device_id> devices) {
  return std::any_of(devices.begin(), devices.end(), [](const device_id& d) {
    return d.kind != device_kind::host;
  });
}

namespace {

std::atomic<device_collective_describer> device_describer{nullptr};

} // namespace

void register_device_collective_describer(device_collective_describer fn) {
  device_describer.store(fn);
}

std::string describe_collective(std::span<const device_id> devices) {
  if (needs_device_collective(devices)) {
    if (auto describe = device_describer.load())
      return describe(devices);
    return "none: device replicas need the CUDA backend (varsync::cuda)";
  }
  return "host one-pass shared-memory all-reduce ("
         + std::to_string(devices.size()) + " in-process replicas)";
}

} // namespace varsync
