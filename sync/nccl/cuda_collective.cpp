#include "sync/nccl/cuda_collective.hpp"

#include <cstring>
#include <utility>

#include <cuda_runtime.h>

#include "varsync/error.hpp"
#include "devices/cuda/cuda_device.hpp"
#include "devices/cuda/cuda_device_internal.hpp"
#include "devices/host_kernels.hpp"
#include "sync/allreduce_one_pass.hpp"
#include "sync/nccl/nccl_clique.hpp"

namespace varsync {

std::string describe_device_collective(const cuda_collective_plan& plan) {
  const auto n = std::to_string(plan.gpu_slot.size());
  std::string out = describe(plan);
  switch (plan.path) {
    case cuda_collective_path::host:
      return "host one-pass shared-memory all-reduce (" + n
             + " in-process replicas)";
    case cuda_collective_path::nccl_clique:
      out += " (" + n + " replicas): step updates from device buffers "
             "(host values copied to each GPU first), ncclAllReduce per dtype "
             "in one group, update kernel on each GPU; reads: ncclReduce to "
             "replica 0, one copy to the host";
      break;
    case cuda_collective_path::same_gpu:
      out += " (cuda:" + std::to_string(plan.gpus.at(0)) + ", " + n
             + " replicas): step updates from device buffers (host values "
               "copied to the GPU first), one reduce-and-apply kernel; reads: "
               "a reduce kernel, one copy to the host";
      break;
    case cuda_collective_path::same_gpu_then_nccl:
      out += " is not implemented: staged through host memory instead (" + n
             + " replicas; GPU inputs copied to the host, host kernels reduce, "
               "the result copied to every GPU component)";
      break;
    case cuda_collective_path::mixed_host_cuda:
      out += " (" + n + " replicas): the host is that device, so data is "
             "staged through host memory (GPU inputs copied to the host, host "
             "kernels reduce, the result copied to every GPU component)";
      break;
  }
  return out + "; all_reduce of host values: host kernels";
}

struct cuda_collective::impl {
  cuda_collective_plan topo;
  std::string description;
  /// One per distinct GPU (topo.gpus order): scratch memory and the stream
  /// every operation on that GPU is issued on.
  std::vector<std::unique_ptr<cuda_device>> gpus;
  std::unique_ptr<nccl::clique> clique; // nccl_clique path only
  /// Scratch blocks of the current run: (gpu slot, pointer).
  std::vector<std::pair<int, void*>> scratch;

  int slot_of(int replica) const {
    return topo.gpu_slot[static_cast<size_t>(replica)];
  }
  cuda_device& gpu_of(int replica) {
    return *gpus[static_cast<size_t>(slot_of(replica))];
  }

  caf::expected<void*> scratch_on(int slot, size_t nbytes) {
    auto p = gpus[static_cast<size_t>(slot)]->allocate(nbytes);
    if (p)
      scratch.emplace_back(slot, *p);
    return p;
  }

  caf::error wait_for_replicas(const collective_plan& plan) {
    for (size_t r = 0; r < plan.ready_events.size(); ++r) {
      void* ev = plan.ready_events[r];
      if (ev == nullptr || topo.gpu_slot[r] < 0)
        continue;
      auto& dev = gpu_of(static_cast<int>(r));
      cuda::device_guard guard{dev.index()};
      if (auto e = cudaStreamWaitEvent(cuda::stream_of(dev),
                                       static_cast<cudaEvent_t>(ev), 0);
          e != cudaSuccess)
        return cuda::make_cuda_error(dev.index(),
                                     "collective: cudaStreamWaitEvent", e);
    }
    return {};
  }

  caf::error copy_to_host(cuda_device& dev, void* dst, const void* src,
                          size_t nbytes) {
    if (nbytes == 0)
      return {};
    cuda::device_guard guard{dev.index()};
    if (auto e = cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDeviceToHost,
                                 cuda::stream_of(dev));
        e != cudaSuccess)
      return cuda::make_cuda_error(dev.index(),
                                   "collective: device-to-host copy", e);
    return {};
  }

  caf::error finish() {
    caf::error first;
    for (auto& dev : gpus)
      if (auto err = dev->synchronize(); err && !first)
        first = std::move(err);
    if (clique)
      if (auto err = clique->synchronize(streams()); err && !first)
        first = std::move(err);
    for (auto& [slot, p] : scratch)
      gpus[static_cast<size_t>(slot)]->release(p);
    scratch.clear();
    return first;
  }

  std::vector<void*> streams() const {
    std::vector<void*> out;
    for (auto& dev : gpus)
      out.push_back(dev->native_stream());
    return out;
  }

  // -- items on every path ---------------------------------------------------

  /// True if replica r's input to `item` is in GPU memory: its component,
  /// or a contribution it kept in a staging buffer.
  bool on_device(const collective_item& item, int r) const {
    if (slot_of(r) < 0)
      return false;
    return item.source == collective_source::components
           || item.staged[static_cast<size_t>(r)] != 0;
  }

  static size_t nbytes_of(const collective_item& item) {
    return static_cast<size_t>(item.count) * size_of(item.type);
  }

  /// contributions -> output: host values, host kernels.
  static void host_item(collective_item& item) {
    std::span<const void* const> inputs{item.inputs};
    if (item.first_only || inputs.size() == 1)
      std::memcpy(item.output, inputs[0], nbytes_of(item));
    else
      host::reduce(item.rop, item.type, item.output, inputs, 0, item.count);
  }

  // -- V4 ----------------------------------------------------------------------

  /// The first output item whose integer reduction does not fit its dtype,
  /// or -1; checked before any item runs. Device inputs are copied to the
  /// host for the check (integer items only). Items that write components
  /// were checked by every replica at enter.
  caf::expected<int64_t> output_overflow(const collective_plan& plan, int n) {
    for (size_t k = 0; k < plan.items.size(); ++k) {
      auto& item = plan.items[k];
      if (is_floating(item.type) || item.target != collective_target::output
          || item.first_only || item.count == 0 || n < 2)
        continue;
      std::vector<tensor> copies;
      std::vector<const void*> inputs(item.inputs.begin(),
                                      item.inputs.begin() + n);
      if (item.source == collective_source::components) {
        for (int r = 0; r < n; ++r) {
          if (slot_of(r) < 0)
            continue; // host memory already
          auto t = gpu_of(r).download(inputs[static_cast<size_t>(r)],
                                      item.type, tensor_shape{item.count});
          if (!t)
            return std::move(t.error());
          copies.push_back(std::move(*t));
          inputs[static_cast<size_t>(r)] = copies.back().raw();
        }
      }
      if (host::first_overflow(item.rop, update_op::assign, item.type, inputs,
                               nullptr, 0, item.count)
          >= 0)
        return static_cast<int64_t>(k);
    }
    return int64_t{-1};
  }

  // -- staged through host memory (mixed, same_gpu_then_nccl) ---------------

  caf::error staged_item(collective_item& item, int n) {
    const tensor_shape shape{item.count};
    std::vector<tensor> copies;
    std::vector<const void*> inputs(item.inputs.begin(), item.inputs.end());
    const int used = item.first_only ? 1 : n;
    inputs.resize(static_cast<size_t>(used));
    {
      for (int r = 0; r < used; ++r) {
        if (!on_device(item, r))
          continue; // host memory already
        auto t = gpu_of(r).download(inputs[static_cast<size_t>(r)], item.type,
                                    shape);
        if (!t)
          return std::move(t.error());
        copies.push_back(std::move(*t));
        inputs[static_cast<size_t>(r)] = copies.back().raw();
      }
    }
    auto y = tensor::empty(item.type, shape);
    if (inputs.size() == 1)
      std::memcpy(y.mutable_raw(), inputs[0], nbytes_of(item));
    else
      host::reduce(item.rop, item.type, y.mutable_raw(), inputs, 0,
                   item.count);
    if (item.target == collective_target::output) {
      std::memcpy(item.output, y.raw(), nbytes_of(item));
      return {};
    }
    for (int r = 0; r < n; ++r) {
      void* c = item.components[static_cast<size_t>(r)];
      if (slot_of(r) < 0)
        host::apply_update(item.uop, item.type, c, y.raw(), 0, item.count);
      else if (auto err = gpu_of(r).apply(c, item.uop, y))
        return err;
    }
    return {};
  }

  // -- same GPU ----------------------------------------------------------------

  caf::error same_gpu_item(collective_item& item, int n) {
    auto& dev = *gpus[0];
    const size_t nbytes = nbytes_of(item);
    const int used = item.first_only ? 1 : n;
    if (item.target == collective_target::output) { // source: components
      if (used == 1)
        return copy_to_host(dev, item.output, item.inputs[0], nbytes);
      auto out = scratch_on(0, nbytes);
      if (!out)
        return std::move(out.error());
      std::span<const void* const> inputs{item.inputs};
      if (auto err = dev.reduce(item.rop, item.type, *out,
                                inputs.first(static_cast<size_t>(used)),
                                item.count))
        return err;
      return copy_to_host(dev, item.output, *out, nbytes);
    }
    // contributions -> components: staged ones are on the GPU already,
    // host tensors are copied there first.
    std::vector<const void*> contributions;
    for (int r = 0; r < used; ++r) {
      if (on_device(item, r)) {
        contributions.push_back(item.inputs[static_cast<size_t>(r)]);
        continue;
      }
      auto p = scratch_on(0, nbytes);
      if (!p)
        return std::move(p.error());
      if (auto err = dev.upload(*p, item.contributions[static_cast<size_t>(r)]))
        return err;
      contributions.push_back(*p);
    }
    return same_device_all_reduce(dev, item.rop, item.uop, item.type,
                                  contributions,
                                  std::span<void* const>{item.components},
                                  item.count, item.mirrored);
  }

  // -- NCCL clique (replica r is rank r on gpus[r]) ----------------------------

  /// The contributions of `item` in a device buffer per rank, reduced in
  /// place: a staged contribution is its buffer (the replica's, released
  /// after the step), a host one is copied into scratch (only rank 0's
  /// matters for first_only items).
  caf::expected<std::vector<void*>> upload_contributions(collective_item& item,
                                                         int n) {
    std::vector<void*> bufs(static_cast<size_t>(n), nullptr);
    for (int r = 0; r < n; ++r) {
      if (on_device(item, r)) {
        bufs[static_cast<size_t>(r)] =
          const_cast<void*>(item.inputs[static_cast<size_t>(r)]);
        continue;
      }
      auto p = scratch_on(r, nbytes_of(item));
      if (!p)
        return std::move(p.error());
      bufs[static_cast<size_t>(r)] = *p;
      if (item.first_only && r > 0)
        continue;
      if (auto err = gpus[static_cast<size_t>(r)]->upload(
            *p, item.contributions[static_cast<size_t>(r)]))
        return err;
    }
    return bufs;
  }

  caf::error apply_everywhere(collective_item& item,
                              const std::vector<void*>& y, int n) {
    for (int r = 0; r < n; ++r)
      if (auto err = gpus[static_cast<size_t>(r)]->apply_local(
            item.components[static_cast<size_t>(r)], item.uop, item.type,
            y[static_cast<size_t>(r)], item.count))
        return err;
    return {};
  }

  caf::error nccl_update_item(collective_item& item, int n,
                              std::span<void* const> streams) {
    auto bufs = upload_contributions(item, n);
    if (!bufs)
      return std::move(bufs.error());
    std::vector<const void*> send(bufs->begin(), bufs->end());
    caf::error err;
    if (item.first_only)
      err = clique->broadcast(item.type, send, *bufs, item.count, 0, streams);
    else
      err = clique->all_reduce(item.rop, item.type, send, *bufs, item.count,
                               streams);
    if (err)
      return err;
    return apply_everywhere(item, *bufs, n);
  }

  /// All update items of a plan that are plain reductions with one reduce
  /// op: one all_reduce_batch (one ncclAllReduce per dtype, one group).
  caf::error nccl_fused_updates(collective_plan& plan,
                                const std::vector<size_t>& which, int n,
                                std::span<void* const> streams) {
    std::vector<std::vector<void*>> bufs;
    std::vector<std::vector<nccl::buffer>> per_rank(static_cast<size_t>(n));
    for (auto k : which) {
      auto& item = plan.items[k];
      auto b = upload_contributions(item, n);
      if (!b)
        return std::move(b.error());
      for (int r = 0; r < n; ++r)
        per_rank[static_cast<size_t>(r)].push_back(
          {(*b)[static_cast<size_t>(r)], item.count, item.type});
      bufs.push_back(std::move(*b));
    }
    auto rop = plan.items[which.front()].rop;
    if (auto err = clique->all_reduce_batch(rop, per_rank, streams))
      return err;
    for (size_t j = 0; j < which.size(); ++j)
      if (auto err = apply_everywhere(plan.items[which[j]], bufs[j], n))
        return err;
    return {};
  }

  caf::error nccl_read_item(collective_item& item, int n,
                            std::span<void* const> streams) {
    const size_t nbytes = nbytes_of(item);
    auto& root = *gpus[0];
    if (item.first_only || n == 1)
      return copy_to_host(root, item.output, item.inputs[0], nbytes);
    auto out = scratch_on(0, nbytes);
    if (!out)
      return std::move(out.error());
    std::vector<void*> recv(static_cast<size_t>(n), nullptr);
    recv[0] = *out;
    if (auto err = clique->reduce(item.rop, item.type,
                                  std::span<const void* const>{item.inputs},
                                  recv, item.count, 0, streams))
      return err;
    return copy_to_host(root, item.output, *out, nbytes);
  }

  caf::error nccl_plan(collective_plan& plan, int n) {
    auto s = streams();
    std::span<void* const> streams_span{s};
    // The step updates are fused when every one of them is a plain
    // reduction with one common op (no only_first_replica / none item, whose
    // broadcast would otherwise be applied out of issue order): all reduced
    // in one batch, then applied in issue order. The values y do not depend
    // on the components, so reducing all first changes nothing.
    std::vector<size_t> fusable;
    bool fusable_plan = true;
    for (size_t k = 0; k < plan.items.size(); ++k) {
      auto& item = plan.items[k];
      if (item.count == 0 || item.source != collective_source::contributions
          || item.target != collective_target::components)
        continue;
      if (item.first_only
          || (!fusable.empty() && plan.items[fusable[0]].rop != item.rop))
        fusable_plan = false;
      fusable.push_back(k);
    }
    const bool fuse = fusable_plan && fusable.size() > 1;
    if (fuse)
      if (auto err = nccl_fused_updates(plan, fusable, n, streams_span))
        return err;
    for (size_t k = 0; k < plan.items.size(); ++k) {
      auto& item = plan.items[k];
      if (item.count == 0)
        continue;
      if (item.source == collective_source::contributions
          && item.target == collective_target::output) {
        host_item(item);
        continue;
      }
      caf::error err;
      if (item.target == collective_target::output)
        err = nccl_read_item(item, n, streams_span);
      else if (!fuse)
        err = nccl_update_item(item, n, streams_span);
      if (err)
        return err;
    }
    return {};
  }
};

caf::expected<std::unique_ptr<cuda_collective>>
cuda_collective::create(std::vector<device_id> devices) {
  auto p = std::make_unique<impl>();
  p->topo = plan_cuda_collective(devices);
  if (p->topo.path == cuda_collective_path::host)
    return make_error(errc::invalid_argument,
                      "cuda_collective: the strategy has no CUDA device");
  p->description = describe_device_collective(p->topo);
  for (int gpu : p->topo.gpus) {
    auto dev = cuda_device::open(gpu);
    if (!dev)
      return std::move(dev.error());
    p->gpus.push_back(std::move(*dev));
  }
  if (p->topo.path == cuda_collective_path::nccl_clique) {
    auto c = nccl::clique::create(p->topo.gpus);
    if (!c)
      return std::move(c.error());
    p->clique = std::move(*c);
  }
  return std::unique_ptr<cuda_collective>{new cuda_collective(std::move(p))};
}

cuda_collective::cuda_collective(std::unique_ptr<impl> p)
  : impl_(std::move(p)) {
}

cuda_collective::~cuda_collective() = default;

const cuda_collective_plan& cuda_collective::topology() const {
  return impl_->topo;
}

const std::string& cuda_collective::description() const {
  return impl_->description;
}

caf::error cuda_collective::run(collective_plan& plan) {
  auto& d = *impl_;
  const int n = plan.num_replicas;
  if (static_cast<size_t>(n) != d.topo.gpu_slot.size())
    return make_error(errc::invalid_argument,
                      "cuda_collective: the plan has " + std::to_string(n)
                        + " replicas, the strategy "
                        + std::to_string(d.topo.gpu_slot.size()));
  for (auto& item : plan.items) {
    const bool reads_components = item.source == collective_source::components;
    const bool writes_components = item.target == collective_target::components;
    if (reads_components && writes_components)
      return make_error(errc::invalid_argument,
                        "cuda_collective: an item that reduces components into "
                        "components is not supported");
    if (!reads_components
        && item.contributions.size() != static_cast<size_t>(n))
      return make_error(errc::invalid_argument,
                        "cuda_collective: expected one contribution per "
                        "replica");
    if (item.inputs.size() != static_cast<size_t>(n)
        || item.components.size() != static_cast<size_t>(n)
        || item.staged.size() != static_cast<size_t>(n))
      return make_error(errc::invalid_argument,
                        "cuda_collective: the plan's per-replica slots do not "
                        "match the replica count");
    for (int r = 0; r < n; ++r)
      if (item.staged[static_cast<size_t>(r)] != 0
          && (d.slot_of(r) < 0 || item.inputs[static_cast<size_t>(r)] == nullptr
              || reads_components))
        return make_error(errc::invalid_argument,
                          "cuda_collective: replica " + std::to_string(r)
                            + " names a staged contribution it did not "
                              "publish on its GPU");
  }
  caf::error err = d.wait_for_replicas(plan);
  if (!err) {
    auto k = d.output_overflow(plan, n);
    if (!k)
      err = std::move(k.error());
    else if (*k >= 0)
      err = output_overflow_error(plan, *k);
  }
  if (!err) {
    switch (d.topo.path) {
      case cuda_collective_path::nccl_clique:
        err = d.nccl_plan(plan, n);
        break;
      case cuda_collective_path::same_gpu:
        for (auto& item : plan.items) {
          if (item.count == 0)
            continue;
          if (item.source == collective_source::contributions
              && item.target == collective_target::output)
            impl::host_item(item);
          else if ((err = d.same_gpu_item(item, n)))
            break;
        }
        break;
      case cuda_collective_path::host:
      case cuda_collective_path::same_gpu_then_nccl:
      case cuda_collective_path::mixed_host_cuda:
        for (auto& item : plan.items) {
          if (item.count == 0)
            continue;
          if (item.source == collective_source::contributions
              && item.target == collective_target::output)
            impl::host_item(item);
          else if ((err = d.staged_item(item, n)))
            break;
        }
        break;
    }
  }
  // Wait even after a failure: queued copies may still read scratch memory.
  auto sync_err = d.finish();
  return err ? err : sync_err;
}

} // namespace varsync
