// Registers the CUDA backend with the host library when varsync::cuda is
// loaded: the cuda:K device factory, the device collective's description and
// its driver. varsync::cuda's link interface names the anchor below as an
// undefined symbol, so that neither a static archive nor --as-needed drops
// this object.

#include <span>
#include <string>

#include "actors/collective_driver.hpp"
#include "actors/cuda/collective_driver_actor.hpp"
#include "devices/cuda/cuda_device.hpp"
#include "devices/device.hpp"
#include "sync/collective_path.hpp"
#include "sync/nccl/cuda_collective.hpp"
#include "sync/nccl/same_device_reduce.hpp"

extern "C" void varsync_cuda_backend_anchor() {}

namespace varsync {
namespace {

std::string describe_cuda_collective(std::span<const device_id> devices) {
  return describe_device_collective(plan_cuda_collective(devices));
}

struct cuda_backend_registration {
  cuda_backend_registration() {
    register_device_factory(device_kind::cuda, &make_cuda_device);
    register_device_collective_describer(&describe_cuda_collective);
    register_collective_driver_spawner(&spawn_collective_driver);
  }
};

const cuda_backend_registration registration;

} // namespace
} // namespace varsync
