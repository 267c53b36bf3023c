// The collective over CUDA replicas on several GPUs: one NCCL clique with a
// rank per GPU (sync/nccl/device_collective.hpp has the algorithm in words).
// Each GPU first reduces the inputs of its own replicas with the reduce
// kernel (none to do where a GPU holds one replica, the usual case), the
// clique then reduces across the GPUs, and every replica's component is
// updated on its GPU from its GPU's result. Data stays on the GPUs; host
// contributions are copied to their replica's GPU first.

#include <span>
#include <utility>
#include <vector>

#include "devices/cuda/cuda_device.hpp"
#include "sync/nccl/device_collective.hpp"
#include "sync/nccl/nccl_clique.hpp"
#include "varsync/error.hpp"

namespace varsync {

namespace {

/// The reduction NCCL runs for `op`: a mean is a sum, divided afterwards
/// by the replicas of the whole strategy (not by the clique's ranks, which
/// are GPUs).
reduce_op across_gpus(reduce_op op) {
  return op == reduce_op::mean ? reduce_op::sum : op;
}

class nccl_clique_collective final : public device_collective {
public:
  /// In one process (across processes, nccl_across_processes decides).
  bool checks_device_contributions() const override { return !joined_; }

  /// Over a clique joined across processes (nccl::clique::join): a rank per
  /// replica in every process.
  caf::error adopt(cuda_collective_plan topo,
                   std::unique_ptr<nccl::clique> joined) {
    if (auto err = open(std::move(topo)))
      return err;
    clique_ = std::move(joined);
    joined_ = true;
    group_replicas();
    return {};
  }

  caf::error create(cuda_collective_plan topo) override {
    if (auto err = open(std::move(topo)))
      return err;
    auto c = nccl::clique::create(topo_.gpus);
    if (!c)
      return std::move(c.error());
    clique_ = std::move(*c);
    group_replicas();
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

  void group_replicas() {
    members_.assign(topo_.gpus.size(), {});
    for (size_t r = 0; r < topo_.gpu_slot.size(); ++r)
      members_[static_cast<size_t>(topo_.gpu_slot[r])].push_back(
        static_cast<int>(r));
  }

  int ranks() const { return static_cast<int>(topo_.gpus.size()); }

  /// The clique rank of the strategy's replica 0 (across processes: global
  /// rank 0, in process 0).
  int root_rank() const { return joined_ ? 0 : slot_of(0); }

  /// What a mean divides by: every replica of the strategy (across
  /// processes the clique has a rank per replica).
  int64_t replicas_in_all(int n) const {
    return joined_ ? clique_->world_size() : n;
  }

  /// Replica r's input to `item` on its GPU: its staged buffer or
  /// component, or its host contribution copied into scratch.
  caf::expected<const void*> input_on_gpu(const collective_item& item,
                                          const item_buffers& b, int r) {
    return on_gpu(slot_of(r), r, b.inputs[static_cast<size_t>(r)],
                  on_device(item, r)
                    ? nullptr
                    : &item.contributions[static_cast<size_t>(r)],
                  nbytes_of(item));
  }

  /// One writable buffer per rank (GPU) holding what that GPU contributes
  /// to `item`: its one replica's input, or its replicas' inputs reduced
  /// (by `op`) into scratch. first_only items: replica 0's input on its
  /// GPU, scratch elsewhere (the broadcast overwrites it).
  caf::expected<std::vector<void*>>
  rank_inputs(const collective_item& item, const item_buffers& b,
              reduce_op op) {
    std::vector<void*> out(static_cast<size_t>(ranks()), nullptr);
    for (int g = 0; g < ranks(); ++g) {
      const auto& mine = members_[static_cast<size_t>(g)];
      std::vector<const void*> inputs;
      for (int r : mine) {
        if (item.first_only && r != 0)
          continue;
        auto in = input_on_gpu(item, b, r);
        if (!in)
          return std::move(in.error());
        inputs.push_back(*in);
      }
      if (inputs.size() == 1 && (item.first_only || mine.size() == 1)) {
        // The replica's own buffer (staged: the collective may overwrite
        // it) or scratch.
        out[static_cast<size_t>(g)] = const_cast<void*>(inputs[0]);
        continue;
      }
      auto p = scratch_on(g, nbytes_of(item));
      if (!p)
        return std::move(p.error());
      out[static_cast<size_t>(g)] = *p;
      if (!inputs.empty())
        if (auto err = gpu(g).reduce(op, item.type, *p, inputs, item.count))
          return err;
    }
    return out;
  }

  /// Every replica's component from its GPU's result y[slot].
  caf::error apply_everywhere(const collective_item& item,
                              const item_buffers& b,
                              const std::vector<void*>& y, int n) {
    for (int r = 0; r < n; ++r)
      if (auto err = gpu_of(r).apply_local(
            b.components[static_cast<size_t>(r)], item.uop, item.type,
            y[static_cast<size_t>(slot_of(r))], item.count))
        return err;
    return {};
  }

  /// The second half of a mean on every rank's result.
  caf::error divide_all(const collective_item& item,
                        const std::vector<void*>& y, int n) {
    if (item.rop != reduce_op::mean || item.first_only)
      return {};
    for (int g = 0; g < ranks(); ++g)
      if (auto err = gpu(g).divide(item.type, y[static_cast<size_t>(g)],
                                   replicas_in_all(n), item.count))
        return err;
    return {};
  }

  caf::error update_item(const collective_item& item, const item_buffers& b,
                         int n, std::span<void* const> streams) {
    const auto op = across_gpus(item.rop);
    auto bufs = rank_inputs(item, b, op);
    if (!bufs)
      return std::move(bufs.error());
    std::vector<const void*> send(bufs->begin(), bufs->end());
    caf::error err;
    if (item.first_only)
      err = clique_->broadcast(item.type, send, *bufs, item.count,
                               root_rank(), streams);
    else
      err = clique_->all_reduce(op, item.type, send, *bufs, item.count,
                                streams);
    if (!err)
      err = divide_all(item, *bufs, n);
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
    const auto op = across_gpus(plan.items[which.front()].rop);
    std::vector<std::vector<void*>> bufs;
    std::vector<std::vector<nccl::buffer>> per_rank(
      static_cast<size_t>(ranks()));
    for (auto k : which) {
      auto& item = plan.items[k];
      auto b = rank_inputs(item, buffers.items[k], op);
      if (!b)
        return std::move(b.error());
      for (int g = 0; g < ranks(); ++g)
        per_rank[static_cast<size_t>(g)].push_back(
          {(*b)[static_cast<size_t>(g)], item.count, item.type});
      bufs.push_back(std::move(*b));
    }
    if (auto err = clique_->all_reduce_batch(op, per_rank, streams))
      return err;
    for (size_t j = 0; j < which.size(); ++j) {
      auto& item = plan.items[which[j]];
      if (auto err = divide_all(item, bufs[j], n))
        return err;
      if (auto err = apply_everywhere(item, buffers.items[which[j]], bufs[j],
                                      n))
        return err;
    }
    return {};
  }

  /// components -> output: each GPU's replicas reduced on it, the clique
  /// reduces to replica 0's GPU, one copy to the host.
  caf::error read_item(const collective_item& item, item_buffers& b, int n,
                       std::span<void* const> streams) {
    if (joined_) // never chosen: reads across processes are staged
      return make_error(errc::invalid_argument,
                        description_ + ": reads do not run over NCCL across "
                                       "processes");
    const size_t nbytes = nbytes_of(item);
    const int root = slot_of(0);
    if (item.first_only || n == 1)
      return copy_to_host(gpu(root), b.output, b.inputs[0], nbytes);
    const auto op = across_gpus(item.rop);
    std::vector<const void*> send(static_cast<size_t>(ranks()), nullptr);
    for (int g = 0; g < ranks(); ++g) {
      const auto& mine = members_[static_cast<size_t>(g)];
      if (mine.size() == 1) {
        send[static_cast<size_t>(g)]
          = b.inputs[static_cast<size_t>(mine[0])];
        continue;
      }
      auto p = scratch_on(g, nbytes);
      if (!p)
        return std::move(p.error());
      std::vector<const void*> inputs;
      for (int r : mine)
        inputs.push_back(b.inputs[static_cast<size_t>(r)]);
      if (auto err = gpu(g).reduce(op, item.type, *p, inputs, item.count))
        return err;
      send[static_cast<size_t>(g)] = *p;
    }
    auto out = scratch_on(root, nbytes);
    if (!out)
      return std::move(out.error());
    std::vector<void*> recv(static_cast<size_t>(ranks()), nullptr);
    recv[static_cast<size_t>(root)] = *out;
    if (auto err = clique_->reduce(op, item.type, send, recv, item.count,
                                   root, streams))
      return err;
    if (item.rop == reduce_op::mean)
      if (auto err = gpu(root).divide(item.type, *out, replicas_in_all(n),
                                      item.count))
        return err;
    return copy_to_host(gpu(root), b.output, *out, nbytes);
  }

  caf::error run_items(const collective_plan& plan,
                       collective_buffers& buffers, int n) override {
    auto s = streams();
    std::span<void* const> streams_span{s};
    // The step updates are fused when every one of them is a plain
    // reduction with one common op (no only_first_replica / none item, whose
    // broadcast would otherwise be applied out of issue order; scatter items
    // are first_only): all reduced in one batch, then applied in issue
    // order. The values y do not depend on the components, so reducing all
    // first changes nothing.
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
  /// The replicas on each GPU (topo_.gpus order), in replica order.
  std::vector<std::vector<int>> members_;
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
