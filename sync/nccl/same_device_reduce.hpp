#pragma once
// Choosing how the replicas of a strategy combine their contributions, given
// the strategy's device list, and the same-GPU path.
//
// NCCL refuses two ranks on one GPU, so an NCCL clique is built over the
// distinct GPUs only. Replicas that share one GPU ("cuda:0" listed twice: a
// single-GPU machine split into logical replicas) reduce with device copies
// and the one-pass reduce_and_apply kernel on that GPU instead.
//
// No CUDA header here.

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <caf/error.hpp>

#include "varsync/dtype.hpp"
#include "varsync/device_id.hpp"
#include "varsync/synchronization.hpp"

namespace varsync {

class cuda_device;

enum class cuda_collective_path : uint8_t {
  /// Only host replicas: the host (shared-memory) collective.
  host,
  /// N > 1 distinct GPUs, one replica each: one NCCL clique
  /// ("nccl clique over N GPUs").
  nccl_clique,
  /// Every replica on the same GPU: device copies and the reduce_and_apply
  /// kernel ("device copies on one GPU"). A single cuda replica also lands
  /// here (nothing to communicate).
  same_gpu,
  /// Several GPUs, some shared by several replicas: reduce on each GPU with
  /// device copies, then an NCCL clique over the distinct GPUs, then copy back
  /// (named only; not implemented yet).
  same_gpu_then_nccl,
  /// Host and CUDA replicas mixed: reduce on one device, then broadcast
  /// (named only; not implemented yet).
  mixed_host_cuda,
};

struct cuda_collective_plan {
  cuda_collective_path path = cuda_collective_path::host;
  /// The distinct GPU ordinals in order of first appearance (the clique's
  /// ranks for nccl_clique).
  std::vector<int> gpus;
  /// For every replica: its index into `gpus`, or -1 for a host replica.
  std::vector<int> gpu_slot;
};

/// The path for a strategy over `devices` (replica r on devices[r]).
cuda_collective_plan plan_cuda_collective(std::span<const device_id> devices);

/// "host collective", "nccl clique over 2 GPUs", "device copies on one GPU",
/// "device copies per GPU, then nccl clique over 2 GPUs", "mixed host and
/// CUDA: reduce on one device, then broadcast".
std::string describe(const cuda_collective_plan& plan);

/// The same-GPU all-reduce: every contribution and component lives on
/// `dev`'s GPU (possibly owned by other cuda_device objects of the same GPU;
/// the caller makes sure their pending work is complete). Computes
/// host::reduce_and_apply(rop, uop, type, contributions, components) bit for
/// bit: y = reduce(rop, contributions) rounded to `type`, then
/// c = uop(c, y) for every component. Unlike the kernel, contributions may
/// alias components (an in-place all-reduce): contributions that overlap a
/// component are first copied to scratch memory of `dev` (the device copies).
/// `mirrored`: the components hold equal values (an ON_WRITE variable's);
/// the result is then computed once from component 0 and stored to all
/// ((2N + 1)·S of memory traffic instead of 3·N·S for assign_add).
/// Runs on dev's stream without waiting for it (dev.synchronize() does; a
/// collective waits once for all its items). At most 64 contributions and
/// 64 components; `count` elements each.
caf::error same_device_all_reduce(cuda_device& dev, reduce_op rop,
                                  update_op uop, dtype type,
                                  std::span<const void* const> contributions,
                                  std::span<void* const> components,
                                  int64_t count, bool mirrored = false);

} // namespace varsync
