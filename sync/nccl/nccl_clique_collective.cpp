// The collective over CUDA replicas on several GPUs: one NCCL clique with a
// rank per GPU (sync/nccl/device_collective.hpp has the algorithm in words).
// Each GPU first reduces the inputs of its own replicas with the reduce
// kernel (none to do where a GPU holds one replica, the usual case), the
// clique then reduces across the GPUs, and every replica's component is
// updated on its GPU from its GPU's result. Data stays on the GPUs; host
// contributions are copied to their replica's GPU first.

#include <algorithm>
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

  /// 16-bit sum, mean and prod travel as float32 (nccl_clique.hpp).
  static bool widened(const collective_item& item) {
    return (item.type == dtype::float16 || item.type == dtype::bfloat16)
           && !item.first_only && item.rop != reduce_op::min
           && item.rop != reduce_op::max;
  }

  /// One item between its phases: what each rank (GPU) hands NCCL, and,
  /// for a read, where the result lands on replica 0's GPU.
  struct pending {
    size_t k = 0;
    bool wide = false;
    std::vector<void*> bufs;
    void* result = nullptr;
  };

  /// Replica inputs of `item` per rank (GPU), ready for NCCL: its one
  /// replica's input (the collective may overwrite a staged buffer), or its
  /// replicas' inputs reduced into scratch; widened to float32 for a
  /// widened item. first_only items: replica 0's input on its GPU, scratch
  /// elsewhere (the broadcast overwrites it). `components`: the inputs are
  /// the replicas' components (a read: NCCL only reads them).
  caf::expected<std::vector<void*>>
  rank_inputs(const collective_item& item, const item_buffers& b, bool wide,
              bool components) {
    std::vector<void*> out(static_cast<size_t>(ranks()), nullptr);
    const auto op = across_gpus(item.rop);
    for (int g = 0; g < ranks(); ++g) {
      const auto& mine = members_[static_cast<size_t>(g)];
      std::vector<const void*> inputs;
      for (int r : mine) {
        if (item.first_only && r != 0)
          continue;
        if (components) {
          inputs.push_back(b.inputs[static_cast<size_t>(r)]);
          continue;
        }
        auto in = input_on_gpu(item, b, r);
        if (!in)
          return std::move(in.error());
        inputs.push_back(*in);
      }
      if (!wide && inputs.size() == 1
          && (item.first_only || mine.size() == 1)) {
        out[static_cast<size_t>(g)] = const_cast<void*>(inputs[0]);
        continue;
      }
      const size_t width = wide ? sizeof(float) : size_of(item.type);
      auto p = scratch_on(g, static_cast<size_t>(item.count) * width);
      if (!p)
        return std::move(p.error());
      out[static_cast<size_t>(g)] = *p;
      caf::error err;
      if (wide)
        err = gpu(g).reduce_widen(op == reduce_op::prod ? op : reduce_op::sum,
                                  item.type, static_cast<float*>(*p), inputs,
                                  item.count);
      else if (inputs.size() == 1)
        err = gpu(g).copy(*p, inputs[0], nbytes_of(item));
      else if (!inputs.empty())
        err = gpu(g).reduce(op, item.type, *p, inputs, item.count);
      if (err)
        return err;
    }
    return out;
  }

  // -- stage: every input on its GPU, each GPU's replicas reduced ------------

  caf::error stage(const collective_plan& plan, collective_buffers& buffers,
                   int n) override {
    pending_.clear();
    for (size_t k = 0; k < plan.items.size(); ++k) {
      auto& item = plan.items[k];
      auto& b = buffers.items[k];
      if (item.count == 0 || item.scatter)
        continue;
      if (item.source == collective_source::contributions
          && item.target == collective_target::output)
        continue; // host values: the host reduces them (apply)
      const bool read = item.target == collective_target::output;
      if (read && joined_) // never chosen: reads across processes are staged
        return make_error(errc::invalid_argument,
                          description_ + ": reads do not run over NCCL "
                                         "across processes");
      if (read && (item.first_only || n == 1))
        continue; // replica 0's component, copied out (apply)
      pending p;
      p.k = k;
      p.wide = widened(item);
      auto bufs = rank_inputs(item, b, p.wide, read);
      if (!bufs)
        return std::move(bufs.error());
      p.bufs = std::move(*bufs);
      if (read) {
        const size_t width = p.wide ? sizeof(float) : size_of(item.type);
        auto out = scratch_on(slot_of(0),
                              static_cast<size_t>(item.count) * width);
        if (!out)
          return std::move(out.error());
        p.result = *out;
      }
      pending_.push_back(std::move(p));
    }
    return {};
  }

  // -- communicate: the NCCL calls, nothing applied -------------------------

  caf::error communicate(const collective_plan& plan, collective_buffers&,
                         int) override {
    auto s = streams();
    std::span<void* const> on{s};
    // Plain reductions fused per reduce op (one NCCL call per dtype each),
    // in order of first appearance: the same calls in every process.
    std::vector<reduce_op> ops;
    for (auto& p : pending_) {
      auto& item = plan.items[p.k];
      if (item.target != collective_target::components || item.first_only)
        continue;
      if (std::find(ops.begin(), ops.end(), item.rop) == ops.end())
        ops.push_back(item.rop);
    }
    for (auto rop : ops)
      if (auto err = fused(plan, rop, on))
        return err;
    for (auto& p : pending_) {
      auto& item = plan.items[p.k];
      std::vector<const void*> send(p.bufs.begin(), p.bufs.end());
      caf::error err;
      if (item.target == collective_target::output) {
        std::vector<void*> recv(static_cast<size_t>(ranks()), nullptr);
        recv[static_cast<size_t>(slot_of(0))] = p.result;
        err = clique_->reduce(across_gpus(item.rop),
                              p.wide ? dtype::float32 : item.type, send, recv,
                              item.count, slot_of(0), on);
      } else if (item.first_only) {
        err = clique_->broadcast(item.type, send, p.bufs, item.count,
                                 root_rank(), on);
      }
      if (err)
        return err;
    }
    return {};
  }

  /// The update items of reduce op `rop` in one all_reduce_batch.
  caf::error fused(const collective_plan& plan, reduce_op rop,
                   std::span<void* const> on) {
    std::vector<std::vector<nccl::buffer>> per_rank(
      static_cast<size_t>(ranks()));
    for (auto& p : pending_) {
      auto& item = plan.items[p.k];
      if (item.target != collective_target::components || item.first_only
          || item.rop != rop)
        continue;
      for (int g = 0; g < ranks(); ++g)
        per_rank[static_cast<size_t>(g)].push_back(
          {p.bufs[static_cast<size_t>(g)], item.count,
           p.wide ? dtype::float32 : item.type});
    }
    return clique_->all_reduce_batch(across_gpus(rop), per_rank, on);
  }

  // -- apply: in plan order, once the NCCL work is done everywhere ------------

  caf::error apply(const collective_plan& plan, collective_buffers& buffers,
                   int n) override {
    size_t next = 0; // pending_ is in plan order
    for (size_t k = 0; k < plan.items.size(); ++k) {
      auto& item = plan.items[k];
      auto& b = buffers.items[k];
      if (item.count == 0)
        continue;
      const pending* p = next < pending_.size() && pending_[next].k == k
                           ? &pending_[next++]
                           : nullptr;
      caf::error err;
      if (item.source == collective_source::contributions
          && item.target == collective_target::output)
        host_item(item, b);
      else if (item.scatter) // first_only
        err = scatter_item(item, b, n);
      else if (item.target == collective_target::output)
        err = p == nullptr
                ? copy_to_host(gpu(slot_of(0)), b.output, b.inputs[0],
                               nbytes_of(item))
                : read_result(item, b, *p, n);
      else if (p != nullptr)
        err = apply_update(item, b, *p, n);
      if (err)
        return err;
    }
    return {};
  }

  /// y on GPU g in the item's dtype: the result rounded once (widened), or
  /// divided for a mean, or as NCCL left it.
  caf::expected<void*> final_value(const collective_item& item, int g,
                                   void* data, bool wide, int n) {
    const bool mean = item.rop == reduce_op::mean && !item.first_only;
    const int64_t divisor = mean ? replicas_in_all(n) : 1;
    if (!wide) {
      if (mean)
        if (auto err = gpu(g).divide(item.type, data, divisor, item.count))
          return err;
      return data;
    }
    auto y = scratch_on(g, nbytes_of(item));
    if (!y)
      return std::move(y.error());
    if (auto err = gpu(g).narrow(item.type, *y, static_cast<float*>(data),
                                 divisor, item.count))
      return err;
    return *y;
  }

  caf::error apply_update(const collective_item& item, const item_buffers& b,
                          const pending& p, int n) {
    std::vector<void*> y(static_cast<size_t>(ranks()));
    for (int g = 0; g < ranks(); ++g) {
      auto v = final_value(item, g, p.bufs[static_cast<size_t>(g)], p.wide, n);
      if (!v)
        return std::move(v.error());
      y[static_cast<size_t>(g)] = *v;
    }
    for (int r = 0; r < n; ++r)
      if (auto err = gpu_of(r).apply_local(
            b.components[static_cast<size_t>(r)], item.uop, item.type,
            y[static_cast<size_t>(slot_of(r))], item.count))
        return err;
    return {};
  }

  caf::error read_result(const collective_item& item, item_buffers& b,
                         const pending& p, int n) {
    const int root = slot_of(0);
    auto v = final_value(item, root, p.result, p.wide, n);
    if (!v)
      return std::move(v.error());
    return copy_to_host(gpu(root), b.output, *v, nbytes_of(item));
  }

  std::unique_ptr<nccl::clique> clique_;
  bool joined_ = false;
  /// The items of the current run that NCCL moves, in plan order.
  std::vector<pending> pending_;
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
