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
// no host wait). run() waits for all its work before it returns.
//
// Phases of a run, so that a failure anywhere changes no component:
//   stage        checks and local work: the plan against the topology, V4 /
//                W4, inputs copied to their GPU (host values through pinned
//                memory, never a pageable copy behind NCCL work), each GPU's
//                replicas reduced (16-bit ones into float32)
//   [hooks.before_communication(the error so far)]
//   communicate  the NCCL calls (algorithms that have a communicator)
//   wait         bounded by buffers.deadline (below)
//   [hooks.before_apply(the outcome so far), if the agreement succeeded]
//   apply        item by item, in plan order: divisions, rounding, the
//                update kernels, scatters, reads into pinned memory
//   wait         for the apply work (local), then the reads are copied out
// Nothing that writes a component is queued before the wait on the NCCL
// work has succeeded. The hooks, set by the algorithm across processes, are
// called on every run whatever happened before them, so that every process
// takes part in its rounds (a process that failed to stage says so instead
// of skipping the round). A device failure during apply leaves the items
// before it applied: a device_error, not a validation error.
//
// Deadlines: work that depends on NCCL peers is bounded, work on this
// process's GPUs alone is not. With an NCCL communicator, the communicate
// phase's enqueue (where NCCL connects peers on first use) and the wait
// after it are bounded by buffers.deadline (the operation's), polling the
// streams and the communicator's asynchronous errors; an NCCL error or the
// deadline aborts the communicator (ncclCommAbort) and the streams get
// abort_grace to drain. The run fails with device_error and changes
// nothing. An aborted communicator is never reused: the next run makes a new
// one (renew_communicator), or fails if it cannot. If the streams did not
// drain, their work may still touch memory: its scratch, its pinned memory
// and (through cuda_device::abandon_work) every block later released on
// those GPUs, is never reused, and the collective is never run again.
// Without a communicator (kernels and copies on this process's GPUs, which
// need no peer) the work runs to completion like the host's, and CUDA
// errors still end it.

// No CUDA or NCCL header here. Not thread-safe: one caller (the driver).

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <caf/error.hpp>
#include <caf/expected.hpp>

#include "sync/collectives/collective_algorithm.hpp"
#include "sync/nccl/same_device_reduce.hpp"
#include "varsync/device_id.hpp"

namespace varsync::nccl {
class clique;
} // namespace varsync::nccl

namespace varsync {

class cuda_device;
class pinned_arena;

/// What the processes of a communicator across processes say to each other
/// around a run's NCCL phase (sync/nccl/nccl_across_processes_collective);
/// empty in one process. Each is called with this process's error so far
/// (none: ready) and returns the run's error from then on (another
/// process's failure, or this one's), none to go on.
struct collective_phase_hooks {
  /// Before the first NCCL call, on every run: the agreement round. Its
  /// outcome is the same in every process.
  std::function<caf::error(const caf::error& local)> before_communication;
  /// After the NCCL work was waited for, before anything is applied: on
  /// every run whose agreement succeeded (else no process calls it).
  std::function<caf::error(const caf::error& local)> before_apply;
};

class device_collective : public collective_algorithm {
public:
  device_collective();
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

  void set_phase_hooks(collective_phase_hooks hooks) {
    hooks_ = std::move(hooks);
  }

protected:
  /// Opens one cuda_device per distinct GPU of `topo` (scratch memory and
  /// one stream per GPU).
  caf::error open(cuda_collective_plan topo);

  /// The algorithm proper, in three phases (above) over a checked plan.
  /// stage: local work before any NCCL call (by default none).
  virtual caf::error stage(const collective_plan& plan,
                           collective_buffers& buffers, int n);
  /// communicate: the NCCL calls (by default none).
  virtual caf::error communicate(const collective_plan& plan,
                                 collective_buffers& buffers, int n);
  /// apply: every item in order. By default: host items (contributions ->
  /// output) on the host, scatters through scatter_item, the others
  /// through run_item.
  virtual caf::error apply(const collective_plan& plan,
                           collective_buffers& buffers, int n);
  /// One item that reads or writes replica memory (algorithms that keep
  /// the default apply).
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
  /// Queues a copy of device memory of `dev` into pinned memory; the bytes
  /// reach `dst` (host memory) when the run's work is done.
  caf::error copy_to_host(cuda_device& dev, void* dst, const void* src,
                          size_t nbytes);

  /// True if replica r's input to `item` is in GPU memory: its component,
  /// or a contribution it kept in a staging buffer.
  bool on_device(const collective_item& item, int r) const;
  /// `data` (replica r's memory: on its GPU, or in host memory when
  /// `host_value` is set) on GPU `slot`: itself, or a copy in scratch
  /// (through pinned memory from the host; a peer copy from another GPU).
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
  /// Every check and stage of a run; the error that stops it, if any.
  caf::error prepare(const collective_plan& plan, collective_buffers& buffers);
  caf::error wait_for_replicas(const collective_buffers& buffers);
  caf::expected<int64_t> output_overflow(const collective_plan& plan,
                                         const collective_buffers& buffers,
                                         int n);
  /// W4 and V4 for the step items whose contributions stayed on the GPUs
  /// (staged_on_device; the replicas checked only host values at enter),
  /// on replica 0's GPU by the check kernels, before any item runs; each
  /// item's copies released once it is checked.
  caf::error check_device_contributions(const collective_plan& plan,
                                        const collective_buffers& buffers,
                                        int n);
  /// Waits for everything queued so far: bounded by `deadline` and
  /// aborting the communicator on an error or at it (`peers`: the work
  /// includes NCCL's), else to completion. Work that does not drain is
  /// abandoned (broken_).
  caf::error settle(wait_clock::time_point deadline, bool peers);
  /// Releases the run's scratch (unless abandoned) and copies the reads
  /// out of pinned memory (if the run succeeded).
  void end_run(bool copy_out);

  /// One per distinct GPU (topo.gpus order): scratch memory and the stream
  /// every operation on that GPU is issued on.
  std::vector<std::unique_ptr<cuda_device>> gpus_;
  /// Scratch blocks of the current run: (gpu slot, pointer).
  std::vector<std::pair<int, void*>> scratch_;
  /// Host copies of the run (pinned memory) and where they go.
  std::unique_ptr<pinned_arena> pinned_;
  struct host_copy {
    void* dst;
    const void* pinned;
    size_t nbytes;
  };
  std::vector<host_copy> to_host_;
  collective_phase_hooks hooks_;
  /// Set when aborted work did not drain (settle): the collective is never
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
