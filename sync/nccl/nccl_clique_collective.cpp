// The collective over N distinct GPUs, one replica each: one NCCL clique
// (sync/nccl/device_collective.hpp has the algorithm in words).

#include <span>
#include <utility>
#include <vector>

#include "devices/cuda/cuda_device.hpp"
#include "sync/nccl/device_collective.hpp"
#include "sync/nccl/nccl_clique.hpp"

namespace varsync {

namespace {

// Replica r is rank r on gpus[r].
class nccl_clique_collective final : public device_collective {
public:
  /// Over a clique joined across processes (nccl::clique::join).
  caf::error adopt(cuda_collective_plan topo,
                   std::unique_ptr<nccl::clique> joined) {
    if (auto err = open(std::move(topo)))
      return err;
    clique_ = std::move(joined);
    joined_ = true;
    return {};
  }

  caf::error create(cuda_collective_plan topo) override {
    if (auto err = open(std::move(topo)))
      return err;
    auto c = nccl::clique::create(topo_.gpus);
    if (!c)
      return std::move(c.error());
    clique_ = std::move(*c);
    return {};
  }

private:
  nccl::clique* communicator() override { return clique_.get(); }

  /// In one process, a new clique over the same GPUs; a communicator
  /// joined across processes is not renewed (the others would have to
  /// join again: their collectives fail with replica_failed instead).
  caf::error renew_communicator() override {
    if (joined_)
      return device_collective::renew_communicator();
    auto c = nccl::clique::create(topo_.gpus);
    if (!c)
      return std::move(c.error());
    clique_ = std::move(*c);
    return {};
  }

  /// The contributions of item `k` in a device buffer per rank, reduced in
  /// place: a staged contribution is its buffer (the replica's, released
  /// after the step), a host one is copied into scratch (only rank 0's
  /// matters for first_only items).
  caf::expected<std::vector<void*>>
  upload_contributions(const collective_item& item, const item_buffers& b,
                       int n) {
    std::vector<void*> bufs(static_cast<size_t>(n), nullptr);
    for (int r = 0; r < n; ++r) {
      if (on_device(item, r)) {
        bufs[static_cast<size_t>(r)]
          = const_cast<void*>(b.inputs[static_cast<size_t>(r)]);
        continue;
      }
      auto p = scratch_on(r, nbytes_of(item));
      if (!p)
        return std::move(p.error());
      bufs[static_cast<size_t>(r)] = *p;
      if (item.first_only && r > 0)
        continue;
      if (auto err
          = gpu(r).upload(*p, item.contributions[static_cast<size_t>(r)]))
        return err;
    }
    return bufs;
  }

  caf::error apply_everywhere(const collective_item& item,
                              const item_buffers& b,
                              const std::vector<void*>& y, int n) {
    for (int r = 0; r < n; ++r)
      if (auto err = gpu(r).apply_local(b.components[static_cast<size_t>(r)],
                                        item.uop, item.type,
                                        y[static_cast<size_t>(r)], item.count))
        return err;
    return {};
  }

  caf::error update_item(const collective_item& item, const item_buffers& b,
                         int n, std::span<void* const> streams) {
    auto bufs = upload_contributions(item, b, n);
    if (!bufs)
      return std::move(bufs.error());
    std::vector<const void*> send(bufs->begin(), bufs->end());
    caf::error err;
    if (item.first_only)
      err = clique_->broadcast(item.type, send, *bufs, item.count, 0, streams);
    else
      err = clique_->all_reduce(item.rop, item.type, send, *bufs, item.count,
                                streams);
    if (err)
      return err;
    return apply_everywhere(item, b, *bufs, n);
  }

  /// All update items of a plan that are plain reductions with one reduce
  /// op: one all_reduce_batch (one ncclAllReduce per dtype, one group).
  caf::error fused_updates(const collective_plan& plan,
                           const collective_buffers& buffers,
                           const std::vector<size_t>& which, int n,
                           std::span<void* const> streams) {
    std::vector<std::vector<void*>> bufs;
    std::vector<std::vector<nccl::buffer>> per_rank(static_cast<size_t>(n));
    for (auto k : which) {
      auto& item = plan.items[k];
      auto b = upload_contributions(item, buffers.items[k], n);
      if (!b)
        return std::move(b.error());
      for (int r = 0; r < n; ++r)
        per_rank[static_cast<size_t>(r)].push_back(
          {(*b)[static_cast<size_t>(r)], item.count, item.type});
      bufs.push_back(std::move(*b));
    }
    auto rop = plan.items[which.front()].rop;
    if (auto err = clique_->all_reduce_batch(rop, per_rank, streams))
      return err;
    for (size_t j = 0; j < which.size(); ++j)
      if (auto err = apply_everywhere(plan.items[which[j]],
                                      buffers.items[which[j]], bufs[j], n))
        return err;
    return {};
  }

  caf::error read_item(const collective_item& item, item_buffers& b, int n,
                       std::span<void* const> streams) {
    const size_t nbytes = nbytes_of(item);
    auto& root = gpu(0);
    if (item.first_only || n == 1)
      return copy_to_host(root, b.output, b.inputs[0], nbytes);
    auto out = scratch_on(0, nbytes);
    if (!out)
      return std::move(out.error());
    std::vector<void*> recv(static_cast<size_t>(n), nullptr);
    recv[0] = *out;
    if (auto err = clique_->reduce(item.rop, item.type,
                                   std::span<const void* const>{b.inputs},
                                   recv, item.count, 0, streams))
      return err;
    return copy_to_host(root, b.output, *out, nbytes);
  }

  caf::error run_items(const collective_plan& plan,
                       collective_buffers& buffers, int n) override {
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
      if (auto err = fused_updates(plan, buffers, fusable, n, streams_span))
        return err;
    for (size_t k = 0; k < plan.items.size(); ++k) {
      auto& item = plan.items[k];
      auto& b = buffers.items[k];
      if (item.count == 0)
        continue;
      if (item.source == collective_source::contributions
          && item.target == collective_target::output) {
        host_item(item, b);
        continue;
      }
      caf::error err;
      if (item.scatter) // first_only, so never fused
        err = scatter_item(item, b, n);
      else if (item.target == collective_target::output)
        err = read_item(item, b, n, streams_span);
      else if (!fuse)
        err = update_item(item, b, n, streams_span);
      if (err)
        return err;
    }
    return {};
  }

  std::unique_ptr<nccl::clique> clique_;
  bool joined_ = false;
};

} // namespace

caf::expected<std::shared_ptr<collective_algorithm>>
make_nccl_clique_collective(cuda_collective_plan topo,
                            std::unique_ptr<nccl::clique> joined) {
  auto out = std::make_shared<nccl_clique_collective>();
  if (auto err = out->adopt(std::move(topo), std::move(joined)))
    return err;
  return std::shared_ptr<collective_algorithm>{std::move(out)};
}

caf::expected<std::shared_ptr<collective_algorithm>>
make_nccl_clique_collective(cuda_collective_plan topo) {
  return create_device_collective<nccl_clique_collective>(std::move(topo));
}

} // namespace varsync
