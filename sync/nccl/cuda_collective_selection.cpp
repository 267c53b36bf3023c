#include "sync/nccl/cuda_collective_selection.hpp"

#include "core/logging.hpp"
#include "devices/cuda/cuda_device.hpp"
#include "sync/collectives/staged_across_processes.hpp"
#include "sync/nccl/device_collective.hpp"
#include "sync/nccl/nccl_across_processes_collective.hpp"
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
    case cuda_collective_path::same_gpu_then_nccl:
      out = make_nccl_clique_collective(std::move(topo));
      break;
    case cuda_collective_path::same_gpu:
      out = make_same_gpu_collective(std::move(topo));
      break;
    case cuda_collective_path::mixed_host_cuda:
      out = make_host_staging_collective(std::move(topo));
      break;
  }
  if (out && *out)
    log()->info("device collective: {}", (*out)->description());
  return out;
}

caf::expected<std::shared_ptr<collective_algorithm>>
make_cuda_collective(process_membership membership,
                     const std::vector<device_id>& devices) {
  // The staged algorithm copies through device objects of its own.
  std::vector<std::unique_ptr<device>> staging;
  for (auto& d : devices) {
    if (d.kind == device_kind::host) {
      staging.emplace_back();
      continue;
    }
    auto dev = make_cuda_device(d.index);
    if (!dev)
      return std::move(dev.error());
    staging.push_back(std::move(*dev));
  }
  auto staged = make_staged_across_processes(membership, std::move(staging));
  // NCCL where every replica of every process is on a GPU of its own
  // (the same answer in every process: they all choose alike).
  std::shared_ptr<collective_algorithm> out = staged;
  if (membership.one_gpu_per_replica)
    out = make_nccl_across_processes(std::move(membership),
                                     plan_cuda_collective(devices),
                                     std::move(staged));
  log()->info("device collective across processes: {}", out->description());
  return out;
}

} // namespace varsync
