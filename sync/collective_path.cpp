#include "sync/collective_path.hpp"

#include <algorithm>

#ifdef VARSYNC_HAVE_CUDA
#include "sync/nccl/cuda_collective.hpp"
#endif

namespace varsync {

bool needs_device_collective(std::span<const device_id> devices) {
  return std::any_of(devices.begin(), devices.end(), [](const device_id& d) {
    return d.kind != device_kind::host;
  });
}

std::string describe_collective(std::span<const device_id> devices) {
#ifdef VARSYNC_HAVE_CUDA
  if (needs_device_collective(devices))
    return describe_device_collective(plan_cuda_collective(devices));
#endif
  return "host one-pass shared-memory all-reduce ("
         + std::to_string(devices.size()) + " in-process replicas)";
}

} // namespace varsync
