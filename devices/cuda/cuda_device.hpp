#pragma once
// A replica on GPU K ("cuda:K"): components in the GPU's stream-ordered memory
// pool (never managed memory), one non-blocking CUDA stream, and the elementwise kernels
// of devices/cuda/cuda_kernels.hpp, which match devices/host_kernels.hpp bit
// for bit.
//
// This header includes no CUDA header (the stream is held behind a pimpl and
// handed out as void*), so any varsync code may include it. Backend code that
// needs the CUDA types includes devices/cuda/cuda_device_internal.hpp.
//
// Threading: like every device, one replica actor owns the object; every
// method first makes GPU K the calling thread's current device (actors move
// between scheduler threads) and restores the previous one on return.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "core/bounded_wait.hpp"
#include "devices/device.hpp"

namespace varsync {

class cuda_device final : public device {
public:
  /// Opens GPU `index`: selects it and creates the non-blocking stream.
  /// device_error naming the device and the CUDA error when there is no such
  /// GPU (or no driver).
  static caf::expected<std::unique_ptr<cuda_device>> open(int index);

  ~cuda_device() override;
  cuda_device(const cuda_device&) = delete;
  cuda_device& operator=(const cuda_device&) = delete;

  device_id id() const override;
  bool host_accessible() const override { return false; }

  /// Stream-ordered allocation (on this device's stream) from the GPU's
  /// pool, which every cuda_device of that GPU in the process shares (the
  /// replicas and the collective): what one releases, all reuse. Sizes are
  /// rounded up to 512 bytes. On cudaErrorMemoryAllocation the GPU is
  /// waited for (pending releases complete) and the allocation retried
  /// once; then out_of_memory.
  caf::expected<void*> allocate(size_t nbytes) override;
  void release(void* data) override;

  // The four data operations are synchronous: they enqueue on the stream and
  // wait for it, so host tensors may go away as soon as they return.
  caf::error upload(void* dst, const tensor& src) override;
  caf::expected<tensor> download(const void* src, dtype type,
                                 const tensor_shape& shape) override;
  caf::error apply(void* dst, update_op op, const tensor& y) override;
  caf::error split_assign(void* dst, const tensor& x, int rank,
                          int num_replicas) override;
  /// The rows go through one device block (the row numbers, then the packed
  /// rows), a gather or scatter kernel and one copy each way; synchronous.
  caf::error read_rows(const void* src, size_t row_bytes,
                       std::span<const int64_t> rows, void* out) override;
  caf::error write_rows(void* dst, size_t row_bytes,
                        std::span<const int64_t> rows, const void* in) override;
  /// Launches the update kernel on the stream and returns (asynchronous).
  caf::error apply_local(void* dst, update_op op, dtype type, const void* y,
                         int64_t count) override;
  /// copy() on the stream (asynchronous).
  caf::error copy_local(void* dst, const void* src, size_t nbytes) override {
    return copy(dst, src, nbytes);
  }

  /// Records the step-done event on the stream (created on first use, then
  /// re-recorded: a collective waits with cudaStreamWaitEvent, never the
  /// host).
  caf::error mark_step_done() override;
  /// The cudaEvent_t of the last mark_step_done, or nullptr before the first.
  void* step_done_event() const override;
  /// cudaStreamWaitEvent on this object's stream (null: nothing to do).
  caf::error wait_for_event(void* event) override;

  // -- device-memory operations for collectives (asynchronous on the stream;
  //    call synchronize() to wait; pointers are device memory of this GPU) --

  /// out = reduce(op, inputs) elementwise (host::reduce semantics, at most
  /// 64 inputs).
  caf::error reduce(reduce_op op, dtype type, void* out,
                    std::span<const void* const> inputs, int64_t count);
  /// host::reduce_and_apply on this GPU (replicas sharing one GPU);
  /// `mirrored`: host::reduce_and_apply_mirrored (equal components: one
  /// read of component 0, the same value stored to all).
  caf::error reduce_and_apply(reduce_op rop, update_op uop, dtype type,
                              std::span<const void* const> contributions,
                              std::span<void* const> components,
                              int64_t count, bool mirrored = false);
  /// data *= factor (floating dtypes).
  caf::error scale(dtype type, void* data, double factor, int64_t count);
  /// data /= divisor in the dtype's arithmetic (the second half of a mean:
  /// one division, as the host computes it; floor division for integers).
  caf::error divide(dtype type, void* data, int64_t divisor, int64_t count);
  /// Device-to-device copy of `nbytes` (src and dst on this GPU).
  caf::error copy(void* dst, const void* src, size_t nbytes);
  /// Copies `nbytes` into this GPU's memory from GPU `src_gpu`'s: a peer
  /// copy when they differ (stream-ordered pool memory of one GPU is not
  /// mapped in another's), else copy().
  caf::error copy_from(int src_gpu, void* dst, const void* src, size_t nbytes);
  /// Host-to-device and device-to-host copies queued on the stream
  /// (asynchronous: `host` must stay valid until the stream has done them,
  /// and should be pinned, or the call waits for the stream's earlier work).
  caf::error enqueue_upload(void* dst, const void* host, size_t nbytes);
  caf::error enqueue_download(void* host, const void* src, size_t nbytes);
  /// out = op over the 16-bit inputs in float32, unrounded
  /// (cuda::launch_reduce_widen; op sum or prod).
  caf::error reduce_widen(reduce_op op, dtype type, float* out,
                          std::span<const void* const> inputs, int64_t count);
  /// out = in / divisor, rounded once to the 16-bit `type`
  /// (cuda::launch_narrow).
  caf::error narrow(dtype type, void* out, const float* in, int64_t divisor,
                    int64_t count);
  /// Waits for everything enqueued on the stream.
  caf::error synchronize();

  // -- checks before anything changes (they wait for the stream) ----------

  /// V4 on this GPU: the first element whose integer reduction of `inputs`
  /// (applied to `component` by `uop`; null: no component) does not fit
  /// `type`, or -1 (host::first_overflow's answer, from the same element
  /// code). int32/int64; at most 64 inputs.
  caf::expected<int64_t> first_overflow(reduce_op rop, update_op uop,
                                        dtype type,
                                        std::span<const void* const> inputs,
                                        const void* component, int64_t count);
  /// W4 on this GPU: the first input (from 1) whose bits differ from input
  /// 0's, or -1. At most 64 inputs.
  caf::expected<int> first_unequal(dtype type,
                                   std::span<const void* const> inputs,
                                   int64_t count);

  /// The deadline of this object's waits (synchronize and the synchronous
  /// data operations): past it they return device_error, and the work stays
  /// queued. time_point::max() (the default): they wait as long as it takes.
  /// Set by a collective for the length of one run.
  void set_wait_deadline(wait_clock::time_point deadline);

  /// Work queued on this GPU may never finish (a collective was aborted and
  /// its streams did not drain): from now on no memory of this GPU is
  /// returned to its pool by any cuda_device of the process (a block
  /// released may still be read or written by that work), and this object's
  /// destructor does not wait for its stream. The memory is lost until the
  /// process exits; the GPU's state is suspect anyway.
  void abandon_work();
  /// abandon_work() was called on some cuda_device of this GPU.
  bool work_abandoned() const;

  /// The GPU ordinal K.
  int index() const;
  /// The cudaStream_t, as void* (cast in backend code).
  void* native_stream() const override;
  /// Bytes this object handed out; bytes the GPU's shared pool holds
  /// reserved but unused.
  size_t live_bytes() const;
  size_t pooled_bytes() const;
  /// The most bytes the GPU's shared pool had in use since the last reset
  /// (its high-water mark); `reset`: start the next one from now.
  size_t pool_used_high(bool reset = false);

  struct impl;

private:
  explicit cuda_device(std::unique_ptr<impl> p);
  /// Copies the row numbers into a fresh device block with room for the
  /// packed rows after them, runs move(index, packed, stream), waits,
  /// releases the block.
  template <class Move>
  caf::error through_rows_block(std::span<const int64_t> rows,
                                size_t row_bytes, const char* what, Move move);
  std::unique_ptr<impl> impl_;
};

/// make_device() for "cuda:K".
caf::expected<std::unique_ptr<device>> make_cuda_device(int index);

/// Number of usable CUDA GPUs; 0 when there is none, no driver, or the probe
/// failed (never fails, never throws). Tests that must not skip on a broken
/// GPU machine use cuda_gpu_count() (varsync/ext/cuda_stream.hpp).
int cuda_device_count();

/// Declared for users in varsync/ext/cuda_stream.hpp: the GPU count, or an error
/// for a CUDA failure other than "no GPU" / "no driver".
caf::expected<int> cuda_gpu_count();

} // namespace varsync
