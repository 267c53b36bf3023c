#pragma once
// The collectives of a strategy that has CUDA replicas, and what they share.
// Each runs a whole plan for every replica from one place, on its driver's
// thread (collective_workers::driver), and is chosen from the strategy's
// device list once (sync/nccl/cuda_collective_selection.cpp):
//
//   nccl_clique_collective   CUDA replicas on several GPUs, one or more per
//                            GPU: one NCCL clique with a rank per GPU
//                            (created once); every rank's call issued inside
//                            one ncclGroupStart/End; step updates: the
//                            contributions the replicas kept on their GPU
//                            (staging buffers, reduced in place; host values
//                            are copied to their GPU first), those of one
//                            GPU's replicas reduced there by the reduce
//                            kernel, then one ncclAllReduce per dtype
//                            (all_reduce_batch) or per item (ncclBroadcast
//                            from replica 0's GPU for only_first_replica and
//                            aggregation none), a mean divided by the
//                            replica count, then the update kernel on every
//                            component; reads: the same per GPU, ncclReduce
//                            to replica 0's GPU, one device-to-host copy.
//   same_gpu_collective      every replica on one GPU (NCCL refuses
//                            duplicate devices): the reduce_and_apply kernel
//                            over the replicas' staging buffers (host values
//                            copied to the GPU first); reads: the reduce
//                            kernel, one device-to-host copy. Bit-identical
//                            to the host kernels.
//   host_staging_collective  host and CUDA replicas mixed: GPU inputs are
//                            copied to the
//                            host, reduced there by the host kernels, and
//                            the result is copied to every GPU component and
//                            applied to every host component. Bit-identical
//                            to the host kernels.
//
// Items that neither read nor write components (strategy::all_reduce of host
// values) are reduced on the host by the host kernels on every path: their
// data is in host memory and so is their result.
//
// Ordering: the replicas are quiesced (between enter and leave) while run()
// works; before touching a replica's memory, the stream used for it waits for
// the replica's step-done event (buffers.ready_events, cudaStreamWaitEvent,
// no host wait). run() waits for all its work before it returns. A device
// failure halfway leaves the items before it applied: it is a device_error,
// not a validation error.
//
// Deadlines: work that depends on NCCL peers is bounded, work on this
// process's GPUs alone is not. With an NCCL communicator, run() waits for
// its GPUs until buffers.deadline (the operation's), polling the streams and
// the communicator's asynchronous errors; an NCCL error or the deadline
// aborts the communicator (ncclCommAbort) and the streams get abort_grace to
// drain. The run fails with device_error (the items before applied). An
// aborted communicator is never reused: the next run makes a new one
// (renew_communicator), or fails if it cannot. If the streams did not drain,
// their work may still touch memory: its scratch, and (through
// cuda_device::abandon_work) every block later released on those GPUs, is
// never reused, and the collective is never run again. Without a
// communicator (kernels and copies on this process's GPUs, which need no
// peer) the work phase runs to completion like the host's, and CUDA errors
// still end it.

// No CUDA or NCCL header here. Not thread-safe: one caller (the driver).

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <caf/error.hpp>
#include <caf/expected.hpp>

#include "sync/collective_algorithm.hpp"
#include "sync/nccl/same_device_reduce.hpp"
#include "varsync/device_id.hpp"

namespace varsync::nccl {
class clique;
} // namespace varsync::nccl

namespace varsync {

class cuda_device;

class device_collective : public collective_algorithm {
public:
  ~device_collective() override;

  const std::string& description() const override { return description_; }

  collective_workers workers() const override {
    return collective_workers::driver;
  }

  bool uses_staging_buffers() const override { return true; }

  /// Checks the plan against the topology, waits for the replicas' steps,
  /// checks V4 for output items and V4/W4 for contributions that stayed on
  /// the GPUs (where checks_device_contributions() is true), runs the
  /// items, waits for the GPUs.
  caf::error run(const collective_plan& plan, collective_buffers& buffers,
                 int worker, int num_workers) final;

  const cuda_collective_plan& topology() const { return topo_; }

  /// The collective's communicator was aborted (or its work abandoned) by
  /// its last run.
  bool failed();

  /// Opens what the algorithm needs for `topo` (by default its GPUs).
  virtual caf::error create(cuda_collective_plan topo) {
    return open(std::move(topo));
  }

protected:
  /// Opens one cuda_device per distinct GPU of `topo` (scratch memory and
  /// one stream per GPU).
  caf::error open(cuda_collective_plan topo);

  /// The algorithm proper: every item of a checked plan. By default item
  /// by item, in order: host items (contributions -> output) on the host,
  /// the others through run_item.
  virtual caf::error run_items(const collective_plan& plan,
                               collective_buffers& buffers, int n);
  /// One item that reads or writes replica memory (algorithms that keep
  /// the default run_items).
  virtual caf::error run_item(const collective_item& item, item_buffers& b,
                              int n);
  /// The algorithm's NCCL communicator, whose asynchronous errors the waits
  /// poll and which a failure aborts; null when it has none.
  virtual nccl::clique* communicator() { return nullptr; }
  /// Replaces a communicator that was aborted; by default it cannot be.
  virtual caf::error renew_communicator();

  int slot_of(int replica) const {
    return topo_.gpu_slot[static_cast<size_t>(replica)];
  }
  cuda_device& gpu_of(int replica) {
    return *gpus_[static_cast<size_t>(slot_of(replica))];
  }
  cuda_device& gpu(int slot) { return *gpus_[static_cast<size_t>(slot)]; }
  /// The GPUs' streams (cudaStream_t), in topo.gpus order.
  std::vector<void*> streams() const;

  /// Device memory on GPU `slot`, released when the run ends.
  caf::expected<void*> scratch_on(int slot, size_t nbytes);
  caf::error copy_to_host(cuda_device& dev, void* dst, const void* src,
                          size_t nbytes);

  /// True if replica r's input to `item` is in GPU memory: its component,
  /// or a contribution it kept in a staging buffer.
  bool on_device(const collective_item& item, int r) const;
  /// `data` (replica r's memory: on a GPU, or in host memory when
  /// `host_value` is set) on GPU `slot`: itself, or a copy in scratch.
  caf::expected<const void*> on_gpu(int slot, int r, const void* data,
                                    const tensor* host_value, size_t nbytes);

  /// A sparse update (item.scatter): the rows of input 0 into every
  /// replica's component, moving only those rows (devices/row_update: read
  /// to the host, computed by the host kernels, written back; in issue
  /// order on the GPU's stream). V4 was checked by every replica at enter.
  caf::error scatter_item(const collective_item& item, item_buffers& b,
                          int n);

  static size_t nbytes_of(const collective_item& item);
  /// contributions -> output: host values, host kernels.
  static void host_item(const collective_item& item, item_buffers& b);

  cuda_collective_plan topo_;
  std::string description_;

private:
  caf::error check(const collective_plan& plan,
                   const collective_buffers& buffers) const;
  caf::error wait_for_replicas(const collective_buffers& buffers);
  caf::expected<int64_t> output_overflow(const collective_plan& plan,
                                         const collective_buffers& buffers,
                                         int n);
  /// W4 and V4 for the step items whose contributions stayed on the GPUs
  /// (staged_on_device; the replicas checked only host values at enter),
  /// on replica 0's GPU by the check kernels, before any item runs.
  caf::error check_device_contributions(const collective_plan& plan,
                                        const collective_buffers& buffers,
                                        int n);
  /// Waits for the GPUs until `deadline` (aborting the communicator on an
  /// error or at the deadline), then releases the run's scratch memory.
  caf::error finish(wait_clock::time_point deadline);

  /// One per distinct GPU (topo.gpus order): scratch memory and the stream
  /// every operation on that GPU is issued on.
  std::vector<std::unique_ptr<cuda_device>> gpus_;
  /// Scratch blocks of the current run: (gpu slot, pointer).
  std::vector<std::pair<int, void*>> scratch_;
  /// Set when aborted work did not drain (finish): the collective is never
  /// run again.
  caf::error broken_;
};

/// How long aborted work gets to drain before its memory is given up.
inline constexpr std::chrono::milliseconds abort_grace{2000};

/// A device algorithm created for `topo`.
template <class Algorithm>
caf::expected<std::shared_ptr<collective_algorithm>>
create_device_collective(cuda_collective_plan topo) {
  auto out = std::make_shared<Algorithm>();
  if (auto err = out->create(std::move(topo)))
    return err;
  return std::shared_ptr<collective_algorithm>{std::move(out)};
}

/// The algorithms, each in its own file.
caf::expected<std::shared_ptr<collective_algorithm>>
make_nccl_clique_collective(cuda_collective_plan topo);
/// The NCCL clique algorithm over this process's part of a communicator
/// across processes (its replicas are global ranks; the caller runs the
/// agreement of the processes first).
caf::expected<std::shared_ptr<collective_algorithm>>
make_nccl_clique_collective(cuda_collective_plan topo,
                            std::unique_ptr<nccl::clique> joined);
caf::expected<std::shared_ptr<collective_algorithm>>
make_same_gpu_collective(cuda_collective_plan topo);
caf::expected<std::shared_ptr<collective_algorithm>>
make_host_staging_collective(cuda_collective_plan topo);

/// The description of the collective a strategy over `plan`'s devices uses,
/// naming where data is staged through host memory.
std::string describe_device_collective(const cuda_collective_plan& plan);

} // namespace varsync
