#include "devices/cuda/cuda_device.hpp"

#include <dlfcn.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "varsync/error.hpp"
#include "devices/cuda/cuda_device_internal.hpp"
#include "varsync/synchronization.hpp"

namespace varsync {

// The .cu file sees the op enums only through these codes.
static_assert(static_cast<uint8_t>(reduce_op::sum) == cuda::op_code::sum);
static_assert(static_cast<uint8_t>(reduce_op::mean) == cuda::op_code::mean);
static_assert(static_cast<uint8_t>(reduce_op::min) == cuda::op_code::min);
static_assert(static_cast<uint8_t>(reduce_op::max) == cuda::op_code::max);
static_assert(static_cast<uint8_t>(reduce_op::prod) == cuda::op_code::prod);
static_assert(static_cast<uint8_t>(update_op::assign) == cuda::op_code::assign);
static_assert(static_cast<uint8_t>(update_op::assign_add)
              == cuda::op_code::assign_add);
static_assert(static_cast<uint8_t>(update_op::assign_sub)
              == cuda::op_code::assign_sub);

namespace cuda {

caf::error make_cuda_error(int device, std::string_view what, cudaError_t e) {
  const auto code = e == cudaErrorMemoryAllocation ? errc::out_of_memory
                                                   : errc::device_error;
  std::string msg = "cuda:" + std::to_string(device) + ": ";
  msg += what;
  msg += ": ";
  msg += cudaGetErrorName(e);
  msg += " (";
  msg += cudaGetErrorString(e);
  msg += ")";
  return make_error(code, std::move(msg));
}

device_guard::device_guard(int device) {
  if (cudaGetDevice(&previous_) != cudaSuccess)
    previous_ = -1;
  status_ = previous_ == device ? cudaSuccess : cudaSetDevice(device);
  if (status_ != cudaSuccess)
    cudaGetLastError(); // clear, so that the error does not leak elsewhere
}

caf::expected<poll_state> query_streams(std::span<const int> gpus,
                                        std::span<const cudaStream_t> streams,
                                        std::string_view what) {
  auto state = poll_state::done;
  for (size_t i = 0; i < streams.size(); ++i) {
    device_guard guard{gpus[i]};
    auto e = cudaStreamQuery(streams[i]);
    if (e == cudaErrorNotReady) {
      state = poll_state::pending;
    } else if (e != cudaSuccess) {
      cudaGetLastError();
      return make_cuda_error(gpus[i], what, e);
    }
  }
  return state;
}

device_guard::~device_guard() {
  int current = -1;
  if (previous_ >= 0 && cudaGetDevice(&current) == cudaSuccess
      && current != previous_)
    cudaSetDevice(previous_);
}

} // namespace cuda

namespace {

constexpr size_t pool_granularity = 512;

size_t pool_size(size_t nbytes) {
  if (nbytes == 0)
    return pool_granularity;
  return (nbytes + pool_granularity - 1) / pool_granularity * pool_granularity;
}

/// The stream-ordered memory pool of GPU `index` and whether work on that GPU
/// was abandoned (abandon_work), one per process, shared by
/// every cuda_device of that GPU (its replicas and the collective): memory
/// one of them releases is reused by all, CUDA ordering the reuse across
/// their streams. Released memory stays reserved (no release threshold), so
/// steady-state steps never reach the driver's allocator. Lives as long as
/// the process.
struct gpu_pool {
  cudaMemPool_t pool = nullptr;
  std::atomic<bool>* abandoned = nullptr;
};

caf::expected<gpu_pool> shared_pool(int index) {
  static std::mutex mtx;
  static std::unordered_map<int, gpu_pool> pools;
  std::lock_guard lock{mtx};
  if (auto i = pools.find(index); i != pools.end())
    return i->second;
  cudaMemPoolProps props{};
  props.allocType = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = index;
  cudaMemPool_t pool = nullptr;
  if (auto e = cudaMemPoolCreate(&pool, &props); e != cudaSuccess) {
    cudaGetLastError();
    return cuda::make_cuda_error(index, "cudaMemPoolCreate", e);
  }
  uint64_t keep = UINT64_MAX;
  if (auto e = cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold,
                                       &keep);
      e != cudaSuccess) {
    cudaGetLastError();
    cudaMemPoolDestroy(pool);
    return cuda::make_cuda_error(index, "cudaMemPoolSetAttribute", e);
  }
  gpu_pool out{pool, new std::atomic<bool>{false}}; // lives as long as the process
  pools.emplace(index, out);
  return out;
}

} // namespace

struct cuda_device::impl {
  int index = 0;
  cudaStream_t stream = nullptr;
  cudaEvent_t step_done = nullptr; // created by the first mark_step_done
  cudaMemPool_t pool = nullptr;    // shared_pool(index)
  std::atomic<bool>* abandoned = nullptr; // shared_pool(index): the GPU's
  bool own_work_abandoned = false;
  wait_clock::time_point deadline = wait_clock::time_point::max();
  mutable std::mutex mtx;          // guards live
  std::unordered_map<void*, size_t> live; // pointer -> rounded size
  size_t live_total = 0;

  caf::error fail(std::string_view what, cudaError_t e) const {
    return cuda::make_cuda_error(index, what, e);
  }

  bool gpu_abandoned() const {
    return abandoned->load(std::memory_order_acquire);
  }

  /// A copy queued on the stream, this GPU selected.
  caf::error enqueue_copy(void* dst, const void* src, size_t nbytes,
                          cudaMemcpyKind kind, std::string_view what) {
    if (nbytes == 0)
      return {};
    cuda::device_guard guard{index};
    if (guard.status() != cudaSuccess)
      return fail("cudaSetDevice", guard.status());
    if (auto e = cudaMemcpyAsync(dst, src, nbytes, kind, stream);
        e != cudaSuccess)
      return fail(what, e);
    return {};
  }

  caf::error sync(std::string_view what) {
    if (deadline == wait_clock::time_point::max()) {
      if (auto e = cudaStreamSynchronize(stream); e != cudaSuccess)
        return fail(what, e);
      return {};
    }
    // Bounded: polled, so that a collective whose peer is gone cannot keep
    // the caller forever (the caller aborts it).
    pollable_work work;
    work.poll = [this, what] {
      return cuda::query_streams({&index, 1}, {&stream, 1}, what);
    };
    auto out = wait_for_work(work, deadline, std::chrono::milliseconds{0},
                             "cuda:" + std::to_string(index) + ": "
                               + std::string{what});
    return std::move(out.error);
  }
};

caf::expected<std::unique_ptr<cuda_device>> cuda_device::open(int index) {
  auto p = std::make_unique<impl>();
  p->index = index;
  int count = 0;
  if (auto e = cudaGetDeviceCount(&count); e != cudaSuccess) {
    cudaGetLastError();
    return p->fail("cannot count CUDA devices", e);
  }
  if (index < 0 || index >= count)
    return make_error(errc::device_error,
                      "cuda:" + std::to_string(index) + ": no such GPU (this "
                        "machine has " + std::to_string(count) + ")");
  cuda::device_guard guard{index};
  if (guard.status() != cudaSuccess)
    return p->fail("cudaSetDevice", guard.status());
  auto pool = shared_pool(index);
  if (!pool)
    return std::move(pool.error());
  p->pool = pool->pool;
  p->abandoned = pool->abandoned;
  if (auto e = cudaStreamCreateWithFlags(&p->stream, cudaStreamNonBlocking);
      e != cudaSuccess)
    return p->fail("cudaStreamCreateWithFlags", e);
  return std::unique_ptr<cuda_device>{new cuda_device(std::move(p))};
}

cuda_device::cuda_device(std::unique_ptr<impl> p) : impl_(std::move(p)) {}

cuda_device::~cuda_device() {
  if (!impl_)
    return;
  cuda::device_guard guard{impl_->index};
  std::lock_guard lock{impl_->mtx};
  if (impl_->gpu_abandoned()) {
    // Work that never finished may still use the blocks (abandon_work).
    impl_->live.clear();
    if (impl_->own_work_abandoned
        || (impl_->stream != nullptr
            && cudaStreamQuery(impl_->stream) == cudaErrorNotReady)) {
      cudaGetLastError();
      return; // the stream and event stay: waiting could take forever
    }
  }
  for (auto& [p, size] : impl_->live)
    cudaFreeAsync(p, impl_->stream);
  impl_->live.clear();
  if (impl_->stream != nullptr)
    cudaStreamSynchronize(impl_->stream);
  if (impl_->step_done != nullptr)
    cudaEventDestroy(impl_->step_done);
  if (impl_->stream != nullptr)
    cudaStreamDestroy(impl_->stream);
}

device_id cuda_device::id() const {
  return {device_kind::cuda, impl_->index};
}

int cuda_device::index() const {
  return impl_->index;
}

void* cuda_device::native_stream() const {
  return static_cast<void*>(impl_->stream);
}

size_t cuda_device::live_bytes() const {
  std::lock_guard lock{impl_->mtx};
  return impl_->live_total;
}

size_t cuda_device::pooled_bytes() const {
  uint64_t reserved = 0;
  uint64_t used = 0;
  if (cudaMemPoolGetAttribute(impl_->pool, cudaMemPoolAttrReservedMemCurrent,
                              &reserved)
        != cudaSuccess
      || cudaMemPoolGetAttribute(impl_->pool, cudaMemPoolAttrUsedMemCurrent,
                                 &used)
           != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return reserved > used ? static_cast<size_t>(reserved - used) : 0;
}

size_t cuda_device::pool_used_high(bool reset) {
  uint64_t high = 0;
  if (cudaMemPoolGetAttribute(impl_->pool, cudaMemPoolAttrUsedMemHigh, &high)
      != cudaSuccess)
    cudaGetLastError();
  if (reset) {
    uint64_t zero = 0;
    if (cudaMemPoolSetAttribute(impl_->pool, cudaMemPoolAttrUsedMemHigh, &zero)
        != cudaSuccess)
      cudaGetLastError();
  }
  return static_cast<size_t>(high);
}

caf::expected<void*> cuda_device::allocate(size_t nbytes) {
  const size_t size = pool_size(nbytes);
  cuda::device_guard guard{impl_->index};
  if (guard.status() != cudaSuccess)
    return impl_->fail("cudaSetDevice", guard.status());
  void* p = nullptr;
  auto e = cudaMallocFromPoolAsync(&p, size, impl_->pool, impl_->stream);
  if (e == cudaErrorMemoryAllocation && !impl_->gpu_abandoned()) {
    cudaGetLastError();
    // Memory that other streams released becomes reusable once their work
    // is done: wait, then try once more. Within a collective's run (a
    // deadline is set) only for this stream, bounded: a device-wide wait
    // could sit behind NCCL work whose peer is gone.
    if (impl_->deadline == wait_clock::time_point::max())
      cudaDeviceSynchronize();
    else if (impl_->sync("allocate: waiting for released memory"))
      cudaGetLastError();
    e = cudaMallocFromPoolAsync(&p, size, impl_->pool, impl_->stream);
  }
  if (e != cudaSuccess) {
    cudaGetLastError();
    return impl_->fail("cannot allocate " + std::to_string(nbytes) + " bytes",
                       e);
  }
  std::lock_guard lock{impl_->mtx};
  impl_->live.emplace(p, size);
  impl_->live_total += size;
  return p;
}

void cuda_device::release(void* data) {
  if (data == nullptr)
    return;
  std::lock_guard lock{impl_->mtx};
  auto i = impl_->live.find(data);
  if (i == impl_->live.end())
    return; // not ours
  impl_->live_total -= i->second;
  impl_->live.erase(i);
  if (impl_->gpu_abandoned())
    return; // never reused (abandon_work)
  // Stream-ordered: work already queued on this stream that still uses the
  // block runs first; other streams reuse it only after that (CUDA tracks
  // it). Callers release only what other streams are done with.
  cuda::device_guard guard{impl_->index};
  if (cudaFreeAsync(data, impl_->stream) != cudaSuccess)
    cudaGetLastError();
}

caf::error cuda_device::upload(void* dst, const tensor& src) {
  if (src.nbytes() == 0)
    return {};
  cuda::device_guard guard{impl_->index};
  if (guard.status() != cudaSuccess)
    return impl_->fail("cudaSetDevice", guard.status());
  if (auto e = cudaMemcpyAsync(dst, src.raw(), src.nbytes(),
                               cudaMemcpyHostToDevice, impl_->stream);
      e != cudaSuccess)
    return impl_->fail("upload (cudaMemcpyAsync)", e);
  return impl_->sync("upload (cudaStreamSynchronize)");
}

caf::expected<tensor> cuda_device::download(const void* src, dtype type,
                                            const tensor_shape& shape) {
  auto out = tensor::empty(type, shape);
  if (out.nbytes() == 0)
    return out;
  cuda::device_guard guard{impl_->index};
  if (guard.status() != cudaSuccess)
    return impl_->fail("cudaSetDevice", guard.status());
  if (auto e = cudaMemcpyAsync(out.mutable_raw(), src, out.nbytes(),
                               cudaMemcpyDeviceToHost, impl_->stream);
      e != cudaSuccess)
    return impl_->fail("download (cudaMemcpyAsync)", e);
  if (auto err = impl_->sync("download (cudaStreamSynchronize)"))
    return err;
  return out;
}

caf::error cuda_device::apply(void* dst, update_op op, const tensor& y) {
  if (op == update_op::assign)
    return upload(dst, y);
  if (y.size() == 0)
    return {};
  auto tmp = allocate(y.nbytes());
  if (!tmp)
    return std::move(tmp.error());
  cuda::device_guard guard{impl_->index};
  caf::error err;
  if (guard.status() != cudaSuccess) {
    err = impl_->fail("cudaSetDevice", guard.status());
  } else if (auto e = cudaMemcpyAsync(*tmp, y.raw(), y.nbytes(),
                                      cudaMemcpyHostToDevice, impl_->stream);
             e != cudaSuccess) {
    err = impl_->fail("apply (cudaMemcpyAsync)", e);
  } else if (auto e = cuda::launch_apply_update(op, y.type(), dst, *tmp,
                                                y.size(), impl_->stream);
             e != cudaSuccess) {
    err = impl_->fail("apply (update kernel launch)", e);
  } else {
    err = impl_->sync("apply (cudaStreamSynchronize)");
  }
  release(*tmp);
  return err;
}

namespace {

/// Where the packed rows start in a block that holds the row numbers first.
size_t packed_offset(size_t num_rows) {
  return (num_rows * sizeof(int64_t) + 255) / 256 * 256;
}

} // namespace

template <class Move>
caf::error cuda_device::through_rows_block(std::span<const int64_t> rows,
                                           size_t row_bytes, const char* what,
                                           Move move) {
  if (rows.empty() || row_bytes == 0)
    return {};
  const size_t at = packed_offset(rows.size());
  auto block = allocate(at + rows.size() * row_bytes);
  if (!block)
    return std::move(block.error());
  auto* index = static_cast<int64_t*>(*block);
  auto* packed = static_cast<std::byte*>(*block) + at;
  cuda::device_guard guard{impl_->index};
  caf::error err;
  if (guard.status() != cudaSuccess)
    err = impl_->fail("cudaSetDevice", guard.status());
  else if (auto e = cudaMemcpyAsync(index, rows.data(),
                                    rows.size() * sizeof(int64_t),
                                    cudaMemcpyHostToDevice, impl_->stream);
           e != cudaSuccess)
    err = impl_->fail(std::string{what} + ": row numbers (cudaMemcpyAsync)",
                      e);
  else
    err = move(index, packed, impl_->stream);
  if (!err)
    err = impl_->sync(std::string{what} + " (cudaStreamSynchronize)");
  release(*block);
  return err;
}

caf::error cuda_device::read_rows(const void* src, size_t row_bytes,
                                  std::span<const int64_t> rows, void* out) {
  return through_rows_block(
    rows, row_bytes, "read_rows",
    [&](const int64_t* index, std::byte* packed,
        cudaStream_t stream) -> caf::error {
      if (auto e = cuda::launch_gather_rows(packed, src, row_bytes, index,
                                            static_cast<int64_t>(rows.size()),
                                            stream);
          e != cudaSuccess)
        return impl_->fail("read_rows (gather kernel launch)", e);
      if (auto e = cudaMemcpyAsync(out, packed, rows.size() * row_bytes,
                                   cudaMemcpyDeviceToHost, stream);
          e != cudaSuccess)
        return impl_->fail("read_rows (cudaMemcpyAsync)", e);
      return {};
    });
}

caf::error cuda_device::write_rows(void* dst, size_t row_bytes,
                                   std::span<const int64_t> rows,
                                   const void* in) {
  return through_rows_block(
    rows, row_bytes, "write_rows",
    [&](const int64_t* index, std::byte* packed,
        cudaStream_t stream) -> caf::error {
      if (auto e = cudaMemcpyAsync(packed, in, rows.size() * row_bytes,
                                   cudaMemcpyHostToDevice, stream);
          e != cudaSuccess)
        return impl_->fail("write_rows (cudaMemcpyAsync)", e);
      if (auto e = cuda::launch_scatter_rows(dst, packed, row_bytes, index,
                                             static_cast<int64_t>(rows.size()),
                                             stream);
          e != cudaSuccess)
        return impl_->fail("write_rows (scatter kernel launch)", e);
      return {};
    });
}

caf::error cuda_device::split_assign(void* dst, const tensor& x, int rank,
                                     int num_replicas) {
  if (num_replicas < 1 || rank < 0 || rank >= num_replicas)
    return make_error(errc::invalid_argument,
                      "cuda:" + std::to_string(impl_->index)
                        + ": split_assign: expected 0 <= rank < num_replicas, "
                          "found rank " + std::to_string(rank) + " of "
                        + std::to_string(num_replicas));
  if (x.size() == 0)
    return {};
  cuda::device_guard guard{impl_->index};
  if (guard.status() != cudaSuccess)
    return impl_->fail("cudaSetDevice", guard.status());
  // x goes straight into the component, which is then split in place.
  if (auto e = cudaMemcpyAsync(dst, x.raw(), x.nbytes(),
                               cudaMemcpyHostToDevice, impl_->stream);
      e != cudaSuccess)
    return impl_->fail("split_assign (cudaMemcpyAsync)", e);
  if (auto e = cuda::launch_split_assign(x.type(), dst, dst, x.size(), rank,
                                         num_replicas, impl_->stream);
      e != cudaSuccess)
    return impl_->fail("split_assign (kernel launch)", e);
  return impl_->sync("split_assign (cudaStreamSynchronize)");
}

caf::error cuda_device::apply_local(void* dst, update_op op, dtype type,
                                   const void* y, int64_t count) {
  if (count == 0)
    return {};
  cuda::device_guard guard{impl_->index};
  if (guard.status() != cudaSuccess)
    return impl_->fail("cudaSetDevice", guard.status());
  if (auto e = cuda::launch_apply_update(op, type, dst, y, count,
                                         impl_->stream);
      e != cudaSuccess)
    return impl_->fail("apply_local (update kernel launch)", e);
  return {};
}

caf::error cuda_device::mark_step_done() {
  cuda::device_guard guard{impl_->index};
  if (guard.status() != cudaSuccess)
    return impl_->fail("cudaSetDevice", guard.status());
  if (impl_->step_done == nullptr) {
    // Timing off: the event only orders work.
    if (auto e = cudaEventCreateWithFlags(&impl_->step_done,
                                          cudaEventDisableTiming);
        e != cudaSuccess) {
      impl_->step_done = nullptr;
      return impl_->fail("mark_step_done (cudaEventCreateWithFlags)", e);
    }
  }
  if (auto e = cudaEventRecord(impl_->step_done, impl_->stream);
      e != cudaSuccess)
    return impl_->fail("mark_step_done (cudaEventRecord)", e);
  return {};
}

void* cuda_device::step_done_event() const {
  return static_cast<void*>(impl_->step_done);
}

caf::error cuda_device::wait_for_event(void* event) {
  if (event == nullptr)
    return {};
  cuda::device_guard guard{impl_->index};
  if (guard.status() != cudaSuccess)
    return impl_->fail("cudaSetDevice", guard.status());
  if (auto e = cudaStreamWaitEvent(impl_->stream,
                                   static_cast<cudaEvent_t>(event), 0);
      e != cudaSuccess)
    return impl_->fail("wait_for_event (cudaStreamWaitEvent)", e);
  return {};
}

caf::error cuda_device::reduce(reduce_op op, dtype type, void* out,
                               std::span<const void* const> inputs,
                               int64_t count) {
  if (inputs.empty() || inputs.size() > cuda::max_kernel_pointers)
    return make_error(errc::invalid_argument,
                      "cuda:" + std::to_string(impl_->index) + ": reduce: "
                        "expected 1 to 64 inputs, found "
                        + std::to_string(inputs.size()));
  if (op == reduce_op::mean && !is_floating(type))
    return make_error(errc::invalid_argument,
                      "cuda:" + std::to_string(impl_->index)
                        + ": reduce: mean requires a floating dtype");
  cuda::device_guard guard{impl_->index};
  if (guard.status() != cudaSuccess)
    return impl_->fail("cudaSetDevice", guard.status());
  if (auto e = cuda::launch_reduce(op, type, out, inputs.data(),
                                   static_cast<int>(inputs.size()), count,
                                   impl_->stream);
      e != cudaSuccess)
    return impl_->fail("reduce (kernel launch)", e);
  return {};
}

caf::error cuda_device::reduce_and_apply(
  reduce_op rop, update_op uop, dtype type,
  std::span<const void* const> contributions, std::span<void* const> components,
  int64_t count, bool mirrored) {
  if (contributions.empty() || contributions.size() > cuda::max_kernel_pointers
      || components.size() > cuda::max_kernel_pointers)
    return make_error(errc::invalid_argument,
                      "cuda:" + std::to_string(impl_->index)
                        + ": reduce_and_apply: expected 1 to 64 contributions "
                          "and at most 64 components, found "
                        + std::to_string(contributions.size()) + " and "
                        + std::to_string(components.size()));
  if (rop == reduce_op::mean && !is_floating(type))
    return make_error(errc::invalid_argument,
                      "cuda:" + std::to_string(impl_->index)
                        + ": reduce_and_apply: mean requires a floating dtype");
  cuda::device_guard guard{impl_->index};
  if (guard.status() != cudaSuccess)
    return impl_->fail("cudaSetDevice", guard.status());
  if (auto e = cuda::launch_reduce_and_apply(
        rop, uop, type, contributions.data(),
        static_cast<int>(contributions.size()), components.data(),
        static_cast<int>(components.size()), mirrored, count, impl_->stream);
      e != cudaSuccess)
    return impl_->fail("reduce_and_apply (kernel launch)", e);
  return {};
}

caf::error cuda_device::scale(dtype type, void* data, double factor,
                              int64_t count) {
  if (!is_floating(type))
    return make_error(errc::invalid_argument,
                      "cuda:" + std::to_string(impl_->index)
                        + ": scale requires a floating dtype");
  cuda::device_guard guard{impl_->index};
  if (guard.status() != cudaSuccess)
    return impl_->fail("cudaSetDevice", guard.status());
  if (auto e = cuda::launch_scale(type, data, factor, count, impl_->stream);
      e != cudaSuccess)
    return impl_->fail("scale (kernel launch)", e);
  return {};
}

caf::error cuda_device::divide(dtype type, void* data, int64_t divisor,
                               int64_t count) {
  if (divisor < 1)
    return make_error(errc::invalid_argument,
                      "cuda:" + std::to_string(impl_->index)
                        + ": divide by " + std::to_string(divisor));
  cuda::device_guard guard{impl_->index};
  if (guard.status() != cudaSuccess)
    return impl_->fail("cudaSetDevice", guard.status());
  if (auto e = cuda::launch_divide(type, data, divisor, count, impl_->stream);
      e != cudaSuccess)
    return impl_->fail("divide (kernel launch)", e);
  return {};
}

caf::error cuda_device::copy(void* dst, const void* src, size_t nbytes) {
  if (nbytes == 0 || dst == src)
    return {};
  cuda::device_guard guard{impl_->index};
  if (guard.status() != cudaSuccess)
    return impl_->fail("cudaSetDevice", guard.status());
  if (auto e = cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDeviceToDevice,
                               impl_->stream);
      e != cudaSuccess)
    return impl_->fail("copy (cudaMemcpyAsync)", e);
  return {};
}

caf::error cuda_device::copy_from(int src_gpu, void* dst, const void* src,
                                  size_t nbytes) {
  if (src_gpu == impl_->index)
    return copy(dst, src, nbytes);
  if (nbytes == 0)
    return {};
  cuda::device_guard guard{impl_->index};
  if (guard.status() != cudaSuccess)
    return impl_->fail("cudaSetDevice", guard.status());
  if (auto e = cudaMemcpyPeerAsync(dst, impl_->index, src, src_gpu, nbytes,
                                   impl_->stream);
      e != cudaSuccess)
    return impl_->fail("copy from cuda:" + std::to_string(src_gpu)
                         + " (cudaMemcpyPeerAsync)",
                       e);
  return {};
}

caf::error cuda_device::enqueue_upload(void* dst, const void* host,
                                       size_t nbytes) {
  return impl_->enqueue_copy(dst, host, nbytes, cudaMemcpyHostToDevice,
                             "upload (cudaMemcpyAsync)");
}

caf::error cuda_device::enqueue_download(void* host, const void* src,
                                         size_t nbytes) {
  return impl_->enqueue_copy(host, src, nbytes, cudaMemcpyDeviceToHost,
                             "download (cudaMemcpyAsync)");
}

caf::error cuda_device::reduce_widen(reduce_op op, dtype type, float* out,
                                     std::span<const void* const> inputs,
                                     int64_t count) {
  if (inputs.empty() || inputs.size() > cuda::max_kernel_pointers
      || (type != dtype::float16 && type != dtype::bfloat16)
      || (op != reduce_op::sum && op != reduce_op::prod))
    return make_error(errc::invalid_argument,
                      "cuda:" + std::to_string(impl_->index)
                        + ": reduce_widen: expected 1 to 64 float16 or "
                          "bfloat16 inputs and sum or prod, found "
                        + std::to_string(inputs.size()) + " of "
                        + std::string{to_string(type)});
  cuda::device_guard guard{impl_->index};
  if (guard.status() != cudaSuccess)
    return impl_->fail("cudaSetDevice", guard.status());
  if (auto e = cuda::launch_reduce_widen(op, type, out, inputs.data(),
                                         static_cast<int>(inputs.size()),
                                         count, impl_->stream);
      e != cudaSuccess)
    return impl_->fail("reduce_widen (kernel launch)", e);
  return {};
}

caf::error cuda_device::narrow(dtype type, void* out, const float* in,
                               int64_t divisor, int64_t count) {
  if ((type != dtype::float16 && type != dtype::bfloat16) || divisor < 1)
    return make_error(errc::invalid_argument,
                      "cuda:" + std::to_string(impl_->index)
                        + ": narrow: expected float16 or bfloat16 and a "
                          "divisor of at least 1, found "
                        + std::string{to_string(type)} + " and "
                        + std::to_string(divisor));
  cuda::device_guard guard{impl_->index};
  if (guard.status() != cudaSuccess)
    return impl_->fail("cudaSetDevice", guard.status());
  if (auto e = cuda::launch_narrow(type, out, in, divisor, count,
                                   impl_->stream);
      e != cudaSuccess)
    return impl_->fail("narrow (kernel launch)", e);
  return {};
}

caf::error cuda_device::synchronize() {
  cuda::device_guard guard{impl_->index};
  if (guard.status() != cudaSuccess)
    return impl_->fail("cudaSetDevice", guard.status());
  return impl_->sync("cudaStreamSynchronize");
}

namespace {

/// Runs `launch(flag)` with a device word set to all ones first, waits for
/// the stream and returns the word (all ones: nothing found).
template <class Word, class Launch>
caf::expected<Word> device_search(cuda_device& dev, const char* what,
                                  Launch launch) {
  auto mem = dev.allocate(sizeof(Word));
  if (!mem)
    return std::move(mem.error());
  auto* flag = static_cast<Word*>(*mem);
  auto stream = cuda::stream_of(dev);
  Word found = 0;
  caf::error failed;
  if (auto e = cudaMemsetAsync(flag, 0xff, sizeof(Word), stream);
      e != cudaSuccess)
    failed = cuda::make_cuda_error(dev.index(),
                                   std::string{what} + " (cudaMemsetAsync)", e);
  else if (auto e = launch(flag, stream); e != cudaSuccess)
    failed = cuda::make_cuda_error(dev.index(),
                                   std::string{what} + " (kernel launch)", e);
  else if (auto e = cudaMemcpyAsync(&found, flag, sizeof(Word),
                                    cudaMemcpyDeviceToHost, stream);
           e != cudaSuccess)
    failed = cuda::make_cuda_error(dev.index(),
                                   std::string{what} + " (cudaMemcpyAsync)", e);
  if (!failed)
    failed = dev.synchronize();
  // After the wait: the stream no longer uses the word.
  dev.release(flag);
  if (failed)
    return failed;
  return found;
}

} // namespace

caf::expected<int64_t>
cuda_device::first_overflow(reduce_op rop, update_op uop, dtype type,
                            std::span<const void* const> inputs,
                            const void* component, int64_t count) {
  if (inputs.empty() || inputs.size() > cuda::max_kernel_pointers
      || (type != dtype::int32 && type != dtype::int64))
    return make_error(errc::invalid_argument,
                      "cuda:" + std::to_string(impl_->index)
                        + ": first_overflow: expected 1 to 64 inputs of an "
                          "integer dtype, found "
                        + std::to_string(inputs.size()) + " of "
                        + std::string{to_string(type)});
  if (count <= 0)
    return int64_t{-1};
  cuda::device_guard guard{impl_->index};
  if (guard.status() != cudaSuccess)
    return impl_->fail("cudaSetDevice", guard.status());
  auto found = device_search<unsigned long long>(
    *this, "first_overflow",
    [&](unsigned long long* flag, cudaStream_t stream) {
      return cuda::launch_first_overflow(rop, uop, type, inputs.data(),
                                         static_cast<int>(inputs.size()),
                                         component, count, flag, stream);
    });
  if (!found)
    return std::move(found.error());
  return *found == ~0ull ? int64_t{-1} : static_cast<int64_t>(*found);
}

caf::expected<int> cuda_device::first_unequal(
  dtype type, std::span<const void* const> inputs, int64_t count) {
  if (inputs.empty() || inputs.size() > cuda::max_kernel_pointers)
    return make_error(errc::invalid_argument,
                      "cuda:" + std::to_string(impl_->index)
                        + ": first_unequal: expected 1 to 64 inputs, found "
                        + std::to_string(inputs.size()));
  if (count <= 0 || inputs.size() == 1)
    return -1;
  cuda::device_guard guard{impl_->index};
  if (guard.status() != cudaSuccess)
    return impl_->fail("cudaSetDevice", guard.status());
  auto found = device_search<unsigned int>(
    *this, "first_unequal", [&](unsigned int* flag, cudaStream_t stream) {
      return cuda::launch_first_unequal(type, inputs.data(),
                                        static_cast<int>(inputs.size()), count,
                                        flag, stream);
    });
  if (!found)
    return std::move(found.error());
  return *found == ~0u ? -1 : static_cast<int>(*found);
}

void cuda_device::set_wait_deadline(wait_clock::time_point deadline) {
  impl_->deadline = deadline;
}

void cuda_device::abandon_work() {
  impl_->own_work_abandoned = true;
  impl_->abandoned->store(true, std::memory_order_release);
}

bool cuda_device::work_abandoned() const {
  return impl_->gpu_abandoned();
}

caf::expected<std::unique_ptr<device>> make_cuda_device(int index) {
  auto dev = cuda_device::open(index);
  if (!dev)
    return std::move(dev.error());
  return std::unique_ptr<device>{std::move(*dev)};
}

int cuda_device_count() {
  auto n = cuda_gpu_count();
  return n ? *n : 0;
}

caf::expected<int> cuda_gpu_count() {
  int count = 0;
  auto e = cudaGetDeviceCount(&count);
  if (e == cudaSuccess)
    return count;
  cudaGetLastError();
  if (e == cudaErrorNoDevice)
    return 0;
  // The runtime reports a missing driver as "insufficient driver" too: tell a
  // machine with no driver at all (no GPU) from one whose driver is too old.
  if (e == cudaErrorInsufficientDriver) {
    void* driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (driver == nullptr)
      return 0;
    dlclose(driver);
  }
  return make_error(errc::device_error,
                    std::string{"CUDA cannot count the GPUs: "}
                      + cudaGetErrorName(e) + " (" + cudaGetErrorString(e)
                      + "); a GPU machine whose driver or device nodes are "
                        "broken, not a machine without a GPU");
}

} // namespace varsync
