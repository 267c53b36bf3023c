#include "sync/nccl/cuda_collective_selection.hpp"

#include "core/logging.hpp"
#include "sync/nccl/device_collective.hpp"
#include "varsync/error.hpp"

namespace varsync {

caf::expected<std::shared_ptr<collective_algorithm>>
make_cuda_collective(const std::vector<device_id>& devices) {
  auto topo = plan_cuda_collective(devices);
  caf::expected<std::shared_ptr<collective_algorithm>> out{
    std::shared_ptr<collective_algorithm>{}};
  switch (topo.path) {
    case cuda_collective_path::host:
      return make_error(errc::invalid_argument,
                        "device collective: the strategy has no CUDA device");
    case cuda_collective_path::nccl_clique:
      out = make_nccl_clique_collective(std::move(topo));
      break;
    case cuda_collective_path::same_gpu:
      out = make_same_gpu_collective(std::move(topo));
      break;
    case cuda_collective_path::same_gpu_then_nccl:
    case cuda_collective_path::mixed_host_cuda:
      out = make_host_staging_collective(std::move(topo));
      break;
  }
  if (out && *out)
    log()->info("device collective: {}", (*out)->description());
  return out;
}

} // namespace varsync
