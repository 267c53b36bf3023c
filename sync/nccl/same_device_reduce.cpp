#include "sync/nccl/same_device_reduce.hpp"

#include <algorithm>
#include <cstdint>
#include <utility>

#include "varsync/error.hpp"
#include "devices/cuda/cuda_device.hpp"

namespace varsync {

cuda_collective_plan plan_cuda_collective(std::span<const device_id> devices) {
  cuda_collective_plan plan;
  size_t num_cuda = 0;
  for (const auto& d : devices) {
    if (d.kind != device_kind::cuda) {
      plan.gpu_slot.push_back(-1);
      continue;
    }
    ++num_cuda;
    auto i = std::find(plan.gpus.begin(), plan.gpus.end(), d.index);
    if (i == plan.gpus.end()) {
      plan.gpus.push_back(d.index);
      i = plan.gpus.end() - 1;
    }
    plan.gpu_slot.push_back(static_cast<int>(i - plan.gpus.begin()));
  }
  if (num_cuda == 0)
    plan.path = cuda_collective_path::host;
  else if (num_cuda < devices.size())
    plan.path = cuda_collective_path::mixed_host_cuda;
  else if (plan.gpus.size() == 1)
    plan.path = cuda_collective_path::same_gpu;
  else if (plan.gpus.size() == num_cuda)
    plan.path = cuda_collective_path::nccl_clique;
  else
    plan.path = cuda_collective_path::same_gpu_then_nccl;
  return plan;
}

std::string describe(const cuda_collective_plan& plan) {
  const auto n = std::to_string(plan.gpus.size());
  switch (plan.path) {
    case cuda_collective_path::host: return "host collective";
    case cuda_collective_path::nccl_clique:
      return "nccl clique over " + n + " GPUs";
    case cuda_collective_path::same_gpu: return "device copies on one GPU";
    case cuda_collective_path::same_gpu_then_nccl:
      return "device copies per GPU, then nccl clique over " + n + " GPUs";
    case cuda_collective_path::mixed_host_cuda:
      return "mixed host and CUDA: reduce on one device, then broadcast";
  }
  return "unknown";
}

namespace {

bool overlaps(const void* a, const void* b, size_t nbytes) {
  const auto x = reinterpret_cast<uintptr_t>(a);
  const auto y = reinterpret_cast<uintptr_t>(b);
  return x < y + nbytes && y < x + nbytes;
}

} // namespace

caf::error same_device_all_reduce(cuda_device& dev, reduce_op rop,
                                  update_op uop, dtype type,
                                  std::span<const void* const> contributions,
                                  std::span<void* const> components,
                                  int64_t count, bool mirrored) {
  if (count < 0)
    return make_error(errc::invalid_argument,
                      "same_device_all_reduce: negative count");
  const size_t nbytes = static_cast<size_t>(count) * size_of(type);
  std::vector<const void*> inputs(contributions.begin(), contributions.end());
  std::vector<void*> scratch;
  auto release_all = [&] {
    for (void* p : scratch)
      dev.release(p);
  };
  caf::error err;
  // Device copies of the contributions that a component would overwrite.
  for (auto& in : inputs) {
    const bool aliased = std::any_of(
      components.begin(), components.end(),
      [&](void* c) { return nbytes > 0 && overlaps(in, c, nbytes); });
    if (!aliased)
      continue;
    auto tmp = dev.allocate(nbytes);
    if (!tmp) {
      err = std::move(tmp.error());
      break;
    }
    scratch.push_back(*tmp);
    if ((err = dev.copy(*tmp, in, nbytes)))
      break;
    in = *tmp;
  }
  if (!err)
    err = dev.reduce_and_apply(rop, uop, type, inputs, components, count,
                               mirrored);
  // No wait: the scratch goes back to dev's pool, whose memory is only used
  // by work on dev's stream, which is ordered after this kernel.
  release_all();
  return err;
}

} // namespace varsync
