#pragma once
// One NCCL communicator clique per strategy over its distinct GPUs, and the
// collectives over it. All ranks are local: the clique is driven from one
// host thread (one place, e.g. the strategy's collective driver), which issues
// the call of every rank inside one ncclGroupStart / ncclGroupEnd. Issuing
// NCCL calls one rank at a time from actors that share scheduler threads can
// deadlock: each rank's call waits for the others, which may be queued
// behind it on the same threads.
//
// NCCL refuses two ranks on one GPU (ncclCommInitAll over a device list with
// a duplicate fails with ncclInvalidUsage). A strategy that lists cuda:0 twice
// (a single GPU split into logical replicas) must not build a clique over its
// replica list: it uses the same-GPU path (device copies + the
// reduce_and_apply kernel, sync/nccl/same_device_reduce.hpp), and
// plan_cuda_collective() picks the path from the device list.
//
// The communicators are non-blocking (ncclConfig_t::blocking = 0): no NCCL
// call keeps the caller. Creating, joining and every group's enqueue (where
// NCCL connects peers on first use) are polled with ncclCommGetAsyncError
// until done, an error, or the clique's deadline (set_deadline; join and
// create take their own), which aborts the clique. The enqueue can take as
// long as the streams' earlier work (seen with NCCL 2.28 on a held stream):
// with a deadline set it is bounded too. The clique's scratch (16-bit
// widening, batch packing, NaN masks) is sized before a call's first NCCL
// operation and grown without any device-wide synchronisation or
// stream-ordered call: a replaced buffer is freed with the clique.
//
// 16-bit floats: sum, mean and prod of float16 / bfloat16 are computed in
// float32 (each rank's input widened, NCCL reduces float32, the mean divided
// in float32) and rounded once to the dtype, as the host kernels do (NCCL's
// own 16-bit sums round at every hop: two ranks of 60000 give inf). Min and
// max are exact in 16 bits and stay there.
//
// No CUDA or NCCL header here: streams are cudaStream_t passed as void*.
// Every collective is asynchronous on the streams (per rank; by default the
// clique's own non-blocking streams) and returns once every rank's operation
// is enqueued; synchronize() or wait() waits. The object is not thread-safe:
// one caller.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include <caf/error.hpp>
#include <caf/expected.hpp>

#include "core/bounded_wait.hpp"
#include "varsync/dtype.hpp"
#include "varsync/synchronization.hpp"

namespace varsync::nccl {

/// One buffer of one rank in a batch all-reduce: `count` elements of `type`
/// at device pointer `data`, reduced in place.
struct buffer {
  void* data = nullptr;
  int64_t count = 0;
  dtype type = dtype::float32;
};

/// The size of an ncclUniqueId: what the processes of one communicator
/// share before they join it.
constexpr size_t unique_id_bytes = 128;

/// ncclGetUniqueId, as bytes (one process makes it, all join with it).
caf::expected<std::vector<std::byte>> new_unique_id();

/// The NCCL library this process runs with (ncclGetVersion: 22809 for
/// 2.28.9), or 0 if it cannot say.
int library_version();

class clique {
public:
  /// A communicator over `gpus` (CUDA ordinals, rank r on gpus[r]), all
  /// ranks in this process; one non-blocking stream per rank. Bounded by
  /// `deadline`. invalid_argument for an empty list or a GPU listed twice;
  /// device_error naming the NCCL or CUDA error (or the deadline) otherwise.
  static caf::expected<std::unique_ptr<clique>>
  create(std::vector<int> gpus,
         wait_clock::time_point deadline = deadline_after(init_timeout));

  /// This process's part of a communicator across processes: ncclCommInitRank
  /// for every GPU of `gpus` (local rank r is global rank first_rank + r of
  /// world_size), all in one group; every process calls join with the same
  /// `id` (new_unique_id in one of them). Waits until every rank joined,
  /// or `deadline` (a process that never comes): device_error, with the
  /// half-made communicators aborted. The collectives below then take this
  /// process's local ranks; roots are global ranks.
  static caf::expected<std::unique_ptr<clique>>
  join(std::vector<int> gpus, int world_size, int first_rank,
       std::span<const std::byte> id,
       wait_clock::time_point deadline = deadline_after(init_timeout));

  /// How long create and join wait by default.
  static constexpr std::chrono::seconds init_timeout{120};

  ~clique();
  clique(const clique&) = delete;
  clique& operator=(const clique&) = delete;

  /// The local ranks (this process's GPUs).
  int size() const;
  /// Every rank of the communicator (size() for a clique made by create).
  int world_size() const;
  /// The global rank of local rank 0.
  int first_rank() const;
  const std::vector<int>& gpus() const;
  /// The clique's own stream of `rank` (a cudaStream_t).
  void* stream(int rank) const;

  /// The deadline of every later call's enqueue (a group whose peers are
  /// not there yet stays in progress): past it the call aborts the clique
  /// and fails with device_error. time_point::max() (the default): no
  /// deadline.
  void set_deadline(wait_clock::time_point deadline);

  // In every collective, `send` and `recv` hold one device pointer per rank
  // (on that rank's GPU), `streams` is empty (the clique's streams) or holds
  // one cudaStream_t per rank. send[r] == recv[r] is in place.

  /// recv[r] = op over all ranks of send[*], for every rank. sum, prod, min,
  /// max; mean is ncclSum, then one division by the rank count on each
  /// rank (floating dtypes only; integer mean is invalid_argument, as
  /// everywhere in varsync). 16-bit sum, mean and prod in float32 (above). Floating min and max propagate NaN as the host
  /// kernels do (NCCL's drop it): a byte mask of the inputs' NaNs is
  /// max-reduced with them and sets those results to a quiet NaN. The same
  /// holds for reduce and all_reduce_batch.
  caf::error all_reduce(reduce_op op, dtype type,
                        std::span<const void* const> send,
                        std::span<void* const> recv, int64_t count,
                        std::span<void* const> streams = {});

  /// recv[r] = send[root] for every rank (send of other ranks is unused and
  /// may be null).
  caf::error broadcast(dtype type, std::span<const void* const> send,
                       std::span<void* const> recv, int64_t count, int root,
                       std::span<void* const> streams = {});

  /// recv[r] = concat(send of every global rank), each `count` elements
  /// (recv holds world_size() * count).
  caf::error all_gather(dtype type, std::span<const void* const> send,
                        std::span<void* const> recv, int64_t count,
                        std::span<void* const> streams = {});

  /// recv[root] = op over send[*] (root: a global rank; recv indexed by
  /// local rank); recv of other ranks is unused (may be null).
  caf::error reduce(reduce_op op, dtype type, std::span<const void* const> send,
                    std::span<void* const> recv, int64_t count, int root,
                    std::span<void* const> streams = {});

  /// Fused in-place all-reduce of a list of buffers per rank: every rank
  /// lists the same (count, dtype) sequence. Buffers are grouped by dtype;
  /// each group with more than one buffer, and every widened 16-bit group,
  /// is packed into a staging buffer (device copies; widened to float32),
  /// reduced with one ncclAllReduce, and unpacked (rounded once); so the
  /// batch costs one NCCL call per dtype, all in one group.
  caf::error all_reduce_batch(reduce_op op,
                              std::span<const std::vector<buffer>> per_rank,
                              std::span<void* const> streams = {});

  /// Waits for the streams (empty: the clique's own) and checks every
  /// communicator for asynchronous NCCL errors, without a deadline.
  caf::error synchronize(std::span<void* const> streams = {});

  /// Waits for the streams (empty: the clique's own) until `deadline`,
  /// polling every communicator for asynchronous NCCL errors. An error or
  /// the deadline aborts the clique (abort()), then waits up to `grace` for
  /// the streams to drain (wait_outcome::drained).
  wait_outcome wait(std::span<void* const> streams,
                    wait_clock::time_point deadline,
                    std::chrono::milliseconds grace);

  /// The first asynchronous error of any communicator (ncclCommGetAsyncError),
  /// or none.
  caf::error async_error();

  /// ncclCommAbort on every communicator: NCCL kernels in flight stop. The
  /// clique is never used again: every later call returns device_error
  /// naming `cause`. Idempotent. The destructor frees nothing that a stream
  /// the clique used may still touch after an abort (it leaks instead), and
  /// never destroys a communicator joined across processes (it aborts it:
  /// destroying may wait for peers that are gone).
  void abort(const caf::error& cause);

  /// The cause abort() recorded, or none.
  const caf::error& failure() const;

  struct impl;

private:
  explicit clique(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
};

} // namespace varsync::nccl
