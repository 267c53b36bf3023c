#include "sync/nccl/device_collective.hpp"

#include <cstring>
#include <utility>

#include <cuda_runtime.h>

#include "varsync/error.hpp"
#include "devices/cuda/cuda_device.hpp"
#include "devices/cuda/cuda_device_internal.hpp"
#include "devices/cuda/pinned_arena.hpp"
#include "core/logging.hpp"
#include "devices/host_kernels.hpp"
#include "sync/collectives/collective_checks.hpp"
#include "sync/nccl/nccl_clique.hpp"
#include "sync/collectives/scatter_items.hpp"
#include "sync/scatter_update.hpp"
#include "sync/policy/step_rules.hpp"

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
      out += " (" + n + " replicas): step updates from device buffers (host "
             "values copied to their GPU first), each GPU's replicas reduced "
             "by the reduce kernel, then ncclAllReduce per dtype in one group "
             "over the GPUs, update kernel on each GPU; reads: the same, "
             "ncclReduce to replica 0's GPU, one copy to the host";
      break;
    case cuda_collective_path::mixed_host_cuda:
      out += " (" + n + " replicas): the host is that device, so data is "
             "staged through host memory (GPU inputs copied to the host, host "
             "kernels reduce, the result copied to every GPU component)";
      break;
  }
  return out + "; all_reduce of host values: host kernels";
}

device_collective::device_collective() = default;

device_collective::~device_collective() = default;

caf::error device_collective::open(cuda_collective_plan topo) {
  pinned_ = std::make_unique<pinned_arena>();
  topo_ = std::move(topo);
  description_ = describe_device_collective(topo_);
  for (int index : topo_.gpus) {
    auto dev = cuda_device::open(index);
    if (!dev)
      return std::move(dev.error());
    gpus_.push_back(std::move(*dev));
  }
  return {};
}

std::vector<void*> device_collective::streams() const {
  std::vector<void*> out;
  for (auto& dev : gpus_)
    out.push_back(dev->native_stream());
  return out;
}

caf::expected<void*> device_collective::scratch_on(int slot, size_t nbytes) {
  auto p = gpu(slot).allocate(nbytes);
  if (p)
    scratch_.emplace_back(slot, *p);
  return p;
}

caf::error device_collective::copy_to_host(cuda_device& dev, void* dst,
                                           const void* src, size_t nbytes) {
  if (nbytes == 0)
    return {};
  auto pinned = pinned_->take(nbytes);
  if (!pinned)
    return std::move(pinned.error());
  if (auto err = dev.enqueue_download(*pinned, src, nbytes))
    return err;
  to_host_.push_back({dst, *pinned, nbytes});
  return {};
}

bool device_collective::on_device(const collective_item& item, int r) const {
  if (slot_of(r) < 0)
    return false;
  return item.source == collective_source::components
         || item.staged[static_cast<size_t>(r)] != 0;
}

size_t device_collective::nbytes_of(const collective_item& item) {
  return static_cast<size_t>(item.count) * size_of(item.type);
}

void device_collective::host_item(const collective_item& item,
                                  item_buffers& b) {
  std::span<const void* const> inputs{b.inputs};
  if (item.first_only || inputs.size() == 1)
    std::memcpy(b.output, inputs[0], nbytes_of(item));
  else
    host::reduce(item.rop, item.type, b.output, inputs, 0, item.count);
}

caf::error
device_collective::wait_for_replicas(const collective_buffers& buffers) {
  for (size_t r = 0; r < buffers.ready_events.size(); ++r) {
    void* ev = buffers.ready_events[r];
    if (ev == nullptr || topo_.gpu_slot[r] < 0)
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

// V4: the first output item whose integer reduction does not fit its
// dtype, or -1; checked before any item runs. Device inputs are copied to
// the host for the check (integer items only). Items that write components
// were checked by every replica at enter.
caf::expected<int64_t>
device_collective::output_overflow(const collective_plan& plan,
                                   const collective_buffers& buffers, int n) {
  for (size_t k = 0; k < plan.items.size(); ++k) {
    auto& item = plan.items[k];
    if (is_floating(item.type) || item.target != collective_target::output
        || item.first_only || item.count == 0 || n < 2)
      continue;
    std::vector<tensor> copies;
    auto& b = buffers.items[k];
    std::vector<const void*> inputs(b.inputs.begin(), b.inputs.begin() + n);
    if (item.source == collective_source::components) {
      for (int r = 0; r < n; ++r) {
        if (slot_of(r) < 0)
          continue; // host memory already
        auto t = gpu_of(r).download(inputs[static_cast<size_t>(r)], item.type,
                                    tensor_shape{item.count});
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

caf::expected<const void*>
device_collective::on_gpu(int slot, int r, const void* data,
                          const tensor* host_value, size_t nbytes) {
  if (host_value == nullptr && slot_of(r) == slot)
    return data;
  auto p = scratch_on(slot, nbytes);
  if (!p)
    return std::move(p.error());
  if (host_value == nullptr) {
    if (auto err = gpu(slot).copy_from(gpu_of(r).index(), *p, data, nbytes))
      return err;
    return static_cast<const void*>(*p);
  }
  auto pinned = pinned_->take(nbytes);
  if (!pinned)
    return std::move(pinned.error());
  std::memcpy(*pinned, host_value->raw(), nbytes);
  if (auto err = gpu(slot).enqueue_upload(*p, *pinned, nbytes))
    return err;
  return static_cast<const void*>(*p);
}

caf::error
device_collective::check_device_contributions(const collective_plan& plan,
                                              const collective_buffers& buffers,
                                              int n) {
  // Elsewhere the replicas never leave these checks to the collective.
  if (!checks_device_contributions() || n < 1 || slot_of(0) < 0)
    return {};
  const int home = slot_of(0);
  bool waited = false;
  for (size_t k = 0; k < plan.items.size(); ++k) {
    auto& item = plan.items[k];
    if (item.count == 0 || item.scatter
        || item.source != collective_source::contributions
        || item.target != collective_target::components
        || !staged_on_device(item)
        || !(item.require_equal || !is_floating(item.type)))
      continue;
    auto& dev = gpu(home);
    if (!waited) { // what other GPUs' replicas wrote, read from this stream
      waited = true;
      cuda::device_guard guard{dev.index()};
      for (size_t r = 0; r < buffers.ready_events.size(); ++r) {
        void* ev = buffers.ready_events[r];
        if (ev == nullptr || topo_.gpu_slot[r] < 0
            || topo_.gpu_slot[r] == home)
          continue;
        if (auto e = cudaStreamWaitEvent(cuda::stream_of(dev),
                                         static_cast<cudaEvent_t>(ev), 0);
            e != cudaSuccess)
          return cuda::make_cuda_error(dev.index(),
                                       "collective: cudaStreamWaitEvent", e);
      }
    }
    auto& b = buffers.items[k];
    const size_t nbytes = nbytes_of(item);
    const int used = item.first_only ? 1 : n;
    // The copies this item makes go once it is checked (the checks wait
    // for the stream): N copies of every item until the run's end could
    // exhaust the GPU.
    const size_t kept = scratch_.size();
    auto release_copies = [&] {
      for (size_t j = kept; j < scratch_.size(); ++j)
        gpu(scratch_[j].first).release(scratch_[j].second);
      scratch_.resize(kept);
    };
    std::vector<const void*> inputs;
    for (int r = 0; r < (item.require_equal ? n : used); ++r) {
      const bool device = on_device(item, r);
      auto p = on_gpu(home, r, b.inputs[static_cast<size_t>(r)],
                      device ? nullptr
                             : &item.contributions[static_cast<size_t>(r)],
                      nbytes);
      if (!p)
        return std::move(p.error());
      inputs.push_back(*p);
    }
    if (item.require_equal) {
      auto j = dev.first_unequal(item.type, inputs, item.count);
      if (!j)
        return std::move(j.error());
      if (*j >= 0)
        return unequal_contributions_error("'" + item.name + "'", *j);
      inputs.resize(static_cast<size_t>(used));
    }
    if (is_floating(item.type)) {
      release_copies();
      continue;
    }
    // V4 against every component; a mirrored item's hold the same values,
    // so replica 0's stands for all of them.
    const int checked = item.mirrored ? 1 : n;
    for (int r = 0; r < checked; ++r) {
      const void* component = b.components[static_cast<size_t>(r)];
      if (component == nullptr)
        continue;
      auto c = on_gpu(home, r, component, nullptr, nbytes);
      if (!c)
        return std::move(c.error());
      auto at = dev.first_overflow(item.rop, item.uop, item.type, inputs, *c,
                                   item.count);
      if (!at)
        return std::move(at.error());
      if (*at >= 0)
        return update_overflow_error(item.name, to_string(item.uop),
                                     item.type, *at, r);
    }
    release_copies();
  }
  return {};
}

caf::error device_collective::renew_communicator() {
  auto* comm = communicator();
  return make_error(errc::device_error,
                    description_ + ": the NCCL communicator was aborted ("
                      + (comm ? describe(comm->failure()) : std::string{"?"})
                      + ") and cannot be renewed");
}

bool device_collective::failed() {
  auto* comm = communicator();
  return broken_ || (comm != nullptr && comm->failure());
}

caf::error device_collective::settle(wait_clock::time_point deadline,
                                     bool peers) {
  wait_outcome out;
  auto* comm = communicator();
  if (peers && comm != nullptr && !comm->failure()) {
    // The communicator's streams are the GPUs' (streams()).
    out = comm->wait(streams(), deadline, abort_grace);
  } else { // no peer to wait for: to completion, CUDA errors end it
    std::vector<int> gpus;
    std::vector<cudaStream_t> waited;
    for (auto& dev : gpus_) {
      gpus.push_back(dev->index());
      waited.push_back(cuda::stream_of(*dev));
    }
    pollable_work work;
    work.poll = [&] {
      return cuda::query_streams(gpus, waited, "collective: stream");
    };
    out = wait_for_work(work, wait_clock::time_point::max(), abort_grace,
                        description_);
  }
  if (!out.drained) {
    // Work that may never finish still uses the scratch, the pinned memory
    // and the replicas' buffers: none of that memory is reused, nor this
    // collective.
    for (auto& dev : gpus_)
      dev->abandon_work();
    pinned_->abandon();
    broken_ = out.error;
  }
  if (out.error)
    log()->error("{}: {}{}", description_, describe(out.error),
                 !out.aborted   ? ""
                 : out.drained ? " (communicator aborted; nothing was applied; "
                                 "the next collective makes a new one where it "
                                 "can)"
                               : " (communicator aborted, the streams did not "
                                 "drain: their memory is given up and this "
                                 "collective is not used again)");
  return std::move(out.error);
}

void device_collective::end_run(bool copy_out) {
  for (auto& dev : gpus_)
    dev->set_wait_deadline(wait_clock::time_point::max());
  if (broken_) {
    scratch_.clear();
    to_host_.clear();
    return;
  }
  for (auto& [slot, p] : scratch_)
    gpu(slot).release(p);
  scratch_.clear();
  if (copy_out)
    for (auto& c : to_host_)
      std::memcpy(c.dst, c.pinned, c.nbytes);
  to_host_.clear();
  pinned_->reset();
}

caf::error device_collective::check(const collective_plan& plan,
                                    const collective_buffers& buffers) const {
  const int n = plan.num_replicas;
  if (static_cast<size_t>(n) != topo_.gpu_slot.size())
    return make_error(errc::invalid_argument,
                      "device collective: the plan has " + std::to_string(n)
                        + " replicas, the strategy "
                        + std::to_string(topo_.gpu_slot.size()));
  if (buffers.items.size() != plan.items.size())
    return make_error(errc::invalid_argument,
                      "device collective: the run binds "
                        + std::to_string(buffers.items.size())
                        + " items of a plan of "
                        + std::to_string(plan.items.size()));
  for (size_t k = 0; k < plan.items.size(); ++k) {
    auto& item = plan.items[k];
    auto& b = buffers.items[k];
    const bool reads_components = item.source == collective_source::components;
    const bool writes_components = item.target == collective_target::components;
    if (reads_components && writes_components)
      return make_error(errc::invalid_argument,
                        "device collective: an item that reduces components "
                        "into components is not supported");
    if (!reads_components
        && item.contributions.size() != static_cast<size_t>(n))
      return make_error(errc::invalid_argument,
                        "device collective: expected one contribution per "
                        "replica");
    if (b.inputs.size() != static_cast<size_t>(n)
        || b.components.size() != static_cast<size_t>(n)
        || item.staged.size() != static_cast<size_t>(n))
      return make_error(errc::invalid_argument,
                        "device collective: the plan's per-replica slots do "
                        "not match the replica count");
    for (int r = 0; r < n; ++r)
      if (item.staged[static_cast<size_t>(r)] != 0
          && (slot_of(r) < 0 || b.inputs[static_cast<size_t>(r)] == nullptr
              || reads_components))
        return make_error(errc::invalid_argument,
                          "device collective: replica " + std::to_string(r)
                            + " names a staged contribution it did not "
                              "publish on its GPU");
  }
  return {};
}

caf::error device_collective::stage(const collective_plan&,
                                    collective_buffers&, int) {
  return {};
}

caf::error device_collective::communicate(const collective_plan&,
                                          collective_buffers&, int) {
  return {};
}

caf::error device_collective::apply(const collective_plan& plan,
                                    collective_buffers& buffers, int n) {
  for (size_t k = 0; k < plan.items.size(); ++k) {
    auto& item = plan.items[k];
    if (item.count == 0)
      continue;
    if (item.source == collective_source::contributions
        && item.target == collective_target::output)
      host_item(item, buffers.items[k]);
    else if (auto err = item.scatter ? scatter_item(item, buffers.items[k], n)
                                     : run_item(item, buffers.items[k], n))
      return err;
  }
  return {};
}

caf::error device_collective::scatter_item(const collective_item& item,
                                           item_buffers& b, int n) {
  for (int r = 0; r < n; ++r) {
    void* component = b.components[static_cast<size_t>(r)];
    if (component == nullptr)
      continue;
    auto u = item_row_update(item, component, b.inputs[0]);
    u.check_overflow = false; // every replica checked at enter (V4)
    auto at = apply_row_update(slot_of(r) < 0 ? nullptr : &gpu_of(r), u);
    if (!at)
      return std::move(at.error());
  }
  return {};
}

caf::error device_collective::run_item(const collective_item&, item_buffers&,
                                       int) {
  return make_error(errc::device_error,
                    description_ + ": runs its plans whole, not item by item");
}

caf::error device_collective::prepare(const collective_plan& plan,
                                      collective_buffers& buffers) {
  if (broken_)
    return make_error(errc::device_error,
                      description_ + ": not used again after its aborted work "
                        "did not drain (" + describe(broken_)
                        + "); the strategy needs to be made anew");
  if (auto err = check(plan, buffers))
    return err;
  if (auto* comm = communicator()) {
    if (comm->failure())
      if (auto err = renew_communicator())
        return err;
    communicator()->set_deadline(buffers.deadline);
    for (auto& dev : gpus_)
      dev->set_wait_deadline(buffers.deadline);
  }
  const int n = plan.num_replicas;
  if (auto err = wait_for_replicas(buffers))
    return err;
  auto k = output_overflow(plan, buffers, n);
  if (!k)
    return std::move(k.error());
  if (*k >= 0)
    return output_overflow_error(plan, *k);
  if (auto err = check_device_contributions(plan, buffers, n))
    return err;
  return stage(plan, buffers, n);
}

caf::error device_collective::run(const collective_plan& plan,
                                  collective_buffers& buffers, int, int) {
  const int n = plan.num_replicas;
  caf::error err = prepare(plan, buffers);
  // A failed agreement is known to every process (they all see every
  // record): none then votes, so the rounds stay aligned.
  bool agreed = true;
  if (hooks_.before_communication) {
    err = hooks_.before_communication(err);
    agreed = !err;
  }
  const bool peers = communicator() != nullptr && !broken_;
  if (!err)
    err = communicate(plan, buffers, n);
  if (peers) {
    // Even after a failure: queued copies may still read scratch memory.
    // Nothing is applied unless this wait succeeds.
    auto waited = settle(buffers.deadline, true);
    if (!err)
      err = std::move(waited);
  }
  if (hooks_.before_apply && agreed)
    err = hooks_.before_apply(err);
  if (!err && !broken_)
    err = apply(plan, buffers, n);
  // The apply work (and, without a communicator, everything) is local.
  caf::error sync_err;
  if (!broken_)
    sync_err = settle(buffers.deadline, false);
  end_run(!err && !sync_err);
  // Refusals (V4, W4, bad input) are the caller's to report.
  if (err && has_code(err, errc::device_error))
    log()->error("device collective failed: {}", describe(err));
  return err ? err : sync_err;
}

} // namespace varsync
