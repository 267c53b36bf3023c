// Registers the CUDA backend with the host library when varsync::cuda is
// loaded: the cuda:K device factory and the device collectives' factory.
// varsync::cuda's link interface names the anchor below as an undefined
// symbol, so that neither a static archive nor --as-needed drops this
// object.

#include "devices/cuda/cuda_device.hpp"
#include "devices/device.hpp"
#include "sync/collectives/device_collective_registry.hpp"
#include "sync/nccl/cuda_collective_selection.hpp"

extern "C" void varsync_cuda_backend_anchor() {}

namespace varsync {
namespace {

struct cuda_backend_registration {
  cuda_backend_registration() {
    register_device_factory(device_kind::cuda, &make_cuda_device);
    register_device_collective_factory(&make_cuda_collective);
    register_process_device_collective_factory(&make_cuda_collective);
  }
};

const cuda_backend_registration registration;

} // namespace
} // namespace varsync
