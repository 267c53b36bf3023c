#include "sync/nccl/nccl_clique.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <set>
#include <string>
#include <utility>

#include <cuda_runtime.h>
#include <nccl.h>

#include "varsync/error.hpp"
#include "devices/cuda/cuda_device_internal.hpp"
#include "devices/cuda/cuda_kernels.hpp"

namespace varsync::nccl {

namespace {

caf::error nccl_error(std::string_view what, ncclResult_t r,
                      ncclComm_t comm = nullptr) {
  std::string msg = "nccl: ";
  msg += what;
  msg += ": ";
  msg += ncclGetErrorString(r);
  if (const char* last = ncclGetLastError(comm); last != nullptr && *last) {
    msg += " (";
    msg += last;
    msg += ")";
  }
  return make_error(errc::device_error, std::move(msg));
}

caf::error invalid(std::string msg) {
  return make_error(errc::invalid_argument, "nccl clique: " + std::move(msg));
}

/// A call that returns ncclInProgress on a non-blocking communicator was
/// accepted: its completion is polled.
bool accepted(ncclResult_t r) {
  return r == ncclSuccess || r == ncclInProgress;
}

ncclDataType_t nccl_type(dtype t) {
  switch (t) {
    case dtype::float16: return ncclFloat16;
    case dtype::bfloat16: return ncclBfloat16;
    case dtype::float32: return ncclFloat32;
    case dtype::float64: return ncclFloat64;
    case dtype::int32: return ncclInt32;
    case dtype::int64: return ncclInt64;
  }
  return ncclFloat32;
}

/// The NCCL operator for `op` on `t`. Mean is ncclSum, then one division
/// per result, as the host computes it: ncclAvg would multiply by 1/N
/// rounded to the dtype, a bias for 16-bit floats (1/3 in float16 is 0.2%
/// off).
caf::expected<ncclRedOp_t> nccl_op(reduce_op op, dtype t) {
  switch (op) {
    case reduce_op::sum: return ncclSum;
    case reduce_op::prod: return ncclProd;
    case reduce_op::min: return ncclMin;
    case reduce_op::max: return ncclMax;
    case reduce_op::mean:
      if (is_floating(t))
        return ncclSum;
      return invalid("mean requires a floating dtype, found "
                     + std::string{to_string(t)});
  }
  return invalid("unknown reduce_op");
}

bool is_16bit(dtype t) {
  return t == dtype::float16 || t == dtype::bfloat16;
}

/// 16-bit sum, mean and prod go through float32 (nccl_clique.hpp).
bool widened(reduce_op op, dtype t) {
  return is_16bit(t) && op != reduce_op::min && op != reduce_op::max;
}

/// What a widened input is reduced with before NCCL (a mean is a sum).
reduce_op widen_op(reduce_op op) {
  return op == reduce_op::prod ? reduce_op::prod : reduce_op::sum;
}

/// Closes an NCCL group on every path out of a scope.
class group {
public:
  group() : status_(ncclGroupStart()) {}
  ~group() {
    if (open_)
      ncclGroupEnd();
  }
  ncclResult_t start_status() const { return status_; }
  ncclResult_t end() {
    open_ = false;
    return ncclGroupEnd();
  }

private:
  ncclResult_t status_;
  bool open_ = true;
};

ncclConfig_t nonblocking_config() {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  return config;
}

/// One rank's device buffer that grows (scratch of the clique's calls).
struct grow_buffer {
  void* data = nullptr;
  size_t size = 0;
};

} // namespace

struct clique::impl {
  std::vector<int> gpus;
  /// The communicator's ranks in all processes, and the global rank of
  /// this process's first (local rank r is global rank first + r).
  int world = 0;
  int first = 0;
  /// Joined across processes: released with ncclCommAbort, never destroyed.
  bool joined = false;
  std::vector<ncclComm_t> comms;
  std::vector<cudaStream_t> streams;
  std::vector<grow_buffer> staging; // per rank: packing, 16-bit widening
  std::vector<grow_buffer> masks;   // per rank: NaN masks of min / max
  /// Buffers replaced by bigger ones, freed with the clique: (gpu, pointer).
  std::vector<std::pair<int, void*>> retired;
  /// Every stream a call used, per rank (the teardown checks them all).
  std::vector<std::set<cudaStream_t>> used;
  wait_clock::time_point deadline = wait_clock::time_point::max();
  /// Set by abort(): the communicators are gone, the clique is not reused.
  caf::error failure;

  ~impl();

  int n() const { return static_cast<int>(gpus.size()); }

  caf::error not_reused() const {
    return make_error(errc::device_error,
                      "nccl clique: the communicator was aborted ("
                        + describe(failure) + ") and is never reused");
  }

  caf::error open_streams();
  caf::error init_ranks(int world_size, int first_rank, const ncclUniqueId& id,
                        wait_clock::time_point until, const std::string& what);
  /// Polls every communicator until no call is in progress, an error, or
  /// `until` (then aborts).
  caf::error settle(wait_clock::time_point until, const std::string& what);
  void abort(const caf::error& cause);
  bool streams_busy();

  /// The stream of rank r for this call.
  cudaStream_t stream_for(std::span<void* const> given, int r) const {
    return given.empty() ? streams[static_cast<size_t>(r)]
                         : static_cast<cudaStream_t>(given[static_cast<size_t>(r)]);
  }

  /// Checks the call's spans and remembers the streams it uses.
  caf::error begin_call(size_t send, size_t recv,
                        std::span<void* const> given) {
    if (failure)
      return not_reused();
    const auto size = gpus.size();
    if (send != size || recv != size)
      return invalid("expected one send and one receive pointer per rank ("
                     + std::to_string(size) + "), found "
                     + std::to_string(send) + " and " + std::to_string(recv));
    if (!given.empty() && given.size() != size)
      return invalid("expected one stream per rank (" + std::to_string(size)
                     + ") or none, found " + std::to_string(given.size()));
    for (int r = 0; r < n(); ++r)
      used[static_cast<size_t>(r)].insert(stream_for(given, r));
    return {};
  }

  /// Runs issue(r, comm, stream) for every rank inside one NCCL group and
  /// waits (bounded by the deadline) until NCCL has enqueued it all: work
  /// queued on the streams afterwards runs after it.
  template <class F>
  caf::error grouped(std::string_view what, std::span<void* const> given,
                     F&& issue) {
    {
      group g;
      if (g.start_status() != ncclSuccess)
        return nccl_error("ncclGroupStart", g.start_status());
      for (int r = 0; r < n(); ++r) {
        auto res
          = issue(r, comms[static_cast<size_t>(r)], stream_for(given, r));
        if (!accepted(res))
          return nccl_error(std::string{what} + " (rank "
                              + std::to_string(first + r) + ", cuda:"
                              + std::to_string(gpus[static_cast<size_t>(r)])
                              + ")",
                            res, comms[static_cast<size_t>(r)]);
      }
      if (auto res = g.end(); !accepted(res))
        return nccl_error(std::string{what} + " (ncclGroupEnd)", res);
    }
    return settle(deadline, std::string{what});
  }

  /// Grows rank r's buffer to at least `bytes` (to twice its size at
  /// least, so that growing is rare). cudaMalloc, which waits for no
  /// stream (a stream-ordered allocation on a stream held up by a stuck
  /// peer's work could wait with it); the old buffer is retired, freed when
  /// the clique goes (cudaFree synchronizes the device: never in a run).
  caf::error reserve(grow_buffer& buf, int r, size_t bytes, const char* what) {
    if (buf.size >= bytes)
      return {};
    const int gpu = gpus[static_cast<size_t>(r)];
    cuda::device_guard guard{gpu};
    if (guard.status() != cudaSuccess)
      return cuda::make_cuda_error(gpu, "cudaSetDevice", guard.status());
    const size_t size = std::max(bytes, 2 * buf.size);
    if (buf.data != nullptr)
      retired.emplace_back(gpu, buf.data);
    buf = {};
    if (auto e = cudaMalloc(&buf.data, size); e != cudaSuccess) {
      cudaGetLastError();
      buf = {};
      return cuda::make_cuda_error(gpu, what, e);
    }
    buf.size = size;
    return {};
  }

  /// Every rank's staging buffer of at least `bytes` and mask buffer of at
  /// least `mask_bytes`, before the call's first NCCL operation.
  caf::error reserve_all(size_t bytes, size_t mask_bytes,
                         std::span<void* const> given) {
    (void) given;
    for (int r = 0; r < n(); ++r) {
      if (auto err = reserve(staging[static_cast<size_t>(r)], r, bytes,
                             "nccl staging buffer (cudaMalloc)"))
        return err;
      if (auto err = reserve(masks[static_cast<size_t>(r)], r, mask_bytes,
                             "nccl NaN mask (cudaMalloc)"))
        return err;
    }
    return {};
  }

  float* wide_at(int r, size_t byte_offset) const {
    return reinterpret_cast<float*>(
      static_cast<char*>(staging[static_cast<size_t>(r)].data) + byte_offset);
  }

  uint8_t* mask_at(int r, size_t at) const {
    return static_cast<uint8_t*>(masks[static_cast<size_t>(r)].data) + at;
  }

  /// Runs launch(r, stream) for every rank with its GPU selected.
  template <class F>
  caf::error each_rank(std::span<void* const> given, const char* what,
                       F&& launch) {
    for (int r = 0; r < n(); ++r) {
      const int gpu = gpus[static_cast<size_t>(r)];
      cuda::device_guard guard{gpu};
      if (guard.status() != cudaSuccess)
        return cuda::make_cuda_error(gpu, "cudaSetDevice", guard.status());
      if (auto e = launch(r, stream_for(given, r)); e != cudaSuccess)
        return cuda::make_cuda_error(gpu, what, e);
    }
    return {};
  }

  /// The second half of a mean: every local rank's result (null: none on
  /// that rank) divided by the rank count (all processes') on its stream.
  caf::error divide_results(dtype type, std::span<void* const> results,
                            int64_t count, std::span<void* const> given) {
    return each_rank(given, "mean: division kernel",
                     [&](int r, cudaStream_t s) {
                       void* data = results[static_cast<size_t>(r)];
                       if (data == nullptr)
                         return cudaSuccess;
                       return cuda::launch_divide(type, data, world, count, s);
                     });
  }

  /// NCCL's min and max drop NaN; the host kernels propagate it. So a
  /// floating min / max also max-reduces a byte mask of NaNs (made from the
  /// inputs, applied to the results): a quarter of float32's traffic.
  static bool masks_nan(reduce_op op, dtype t) {
    return (op == reduce_op::min || op == reduce_op::max) && is_floating(t);
  }

  /// Every local rank's NaN mask of `count` elements at data[r], at byte
  /// `at` of its (reserved) mask buffer.
  caf::error make_masks(dtype type, std::span<const void* const> data,
                        int64_t count, size_t at,
                        std::span<void* const> given) {
    return each_rank(given, "NaN mask kernel", [&](int r, cudaStream_t s) {
      return cuda::launch_nan_mask(type, data[static_cast<size_t>(r)],
                                   mask_at(r, at), count, s);
    });
  }

  /// The reduced masks onto the results (null: no result on that rank).
  caf::error apply_masks(dtype type, std::span<void* const> results,
                         int64_t count, size_t at,
                         std::span<void* const> given) {
    return each_rank(given, "NaN mask kernel", [&](int r, cudaStream_t s) {
      void* data = results[static_cast<size_t>(r)];
      if (data == nullptr)
        return cudaSuccess;
      return cuda::launch_apply_nan_mask(type, data, mask_at(r, at), count, s);
    });
  }

  /// Every rank's input in[r] widened into its staging buffer at `at`.
  caf::error widen(reduce_op op, dtype type, std::span<const void* const> in,
                   int64_t count, size_t at, std::span<void* const> given) {
    return each_rank(given, "16-bit widening kernel",
                     [&](int r, cudaStream_t s) {
                       const void* src = in[static_cast<size_t>(r)];
                       return cuda::launch_reduce_widen(
                         widen_op(op), type, wide_at(r, at), &src, 1, count,
                         s);
                     });
  }

  /// The widened results at `at` rounded once into out[r] (null: none on
  /// that rank), a mean divided by the rank count first.
  caf::error narrow(reduce_op op, dtype type, std::span<void* const> out,
                    int64_t count, size_t at, std::span<void* const> given) {
    const int64_t divisor = op == reduce_op::mean ? world : 1;
    return each_rank(given, "16-bit rounding kernel",
                     [&](int r, cudaStream_t s) {
                       void* dst = out[static_cast<size_t>(r)];
                       if (dst == nullptr)
                         return cudaSuccess;
                       return cuda::launch_narrow(type, dst, wide_at(r, at),
                                                  divisor, count, s);
                     });
  }
};

clique::impl::~impl() {
  // After an abort whose work did not drain, no memory is freed and no
  // stream destroyed: that work may still read or write them.
  const bool keep = failure && streams_busy();
  for (size_t r = 0; r < gpus.size(); ++r) {
    cuda::device_guard guard{gpus[r]};
    if (r < comms.size() && comms[r] != nullptr) {
      if (joined)
        ncclCommAbort(comms[r]); // destroying may wait for peers
      else
        ncclCommDestroy(comms[r]);
    }
  }
  if (!keep) {
    for (size_t r = 0; r < gpus.size(); ++r) {
      cuda::device_guard guard{gpus[r]};
      if (r < streams.size() && streams[r] != nullptr)
        cudaStreamSynchronize(streams[r]);
      for (auto* p : {staging[r].data, masks[r].data})
        if (p != nullptr)
          cudaFree(p);
      if (r < streams.size() && streams[r] != nullptr)
        cudaStreamDestroy(streams[r]);
    }
    for (auto& [gpu, p] : retired) {
      cuda::device_guard guard{gpu};
      cudaFree(p);
    }
  }
  cudaGetLastError();
}

bool clique::impl::streams_busy() {
  for (size_t r = 0; r < used.size(); ++r) {
    cuda::device_guard guard{gpus[r]};
    for (auto s : used[r])
      if (cudaStreamQuery(s) == cudaErrorNotReady) {
        cudaGetLastError();
        return true;
      }
  }
  cudaGetLastError();
  return false;
}

caf::error clique::impl::open_streams() {
  const auto count = gpus.size();
  comms.assign(count, nullptr);
  streams.assign(count, nullptr);
  staging.assign(count, {});
  masks.assign(count, {});
  used.assign(count, {});
  for (size_t r = 0; r < count; ++r) {
    cuda::device_guard guard{gpus[r]};
    if (guard.status() != cudaSuccess)
      return cuda::make_cuda_error(gpus[r], "cudaSetDevice", guard.status());
    if (auto e = cudaStreamCreateWithFlags(&streams[r], cudaStreamNonBlocking);
        e != cudaSuccess)
      return cuda::make_cuda_error(gpus[r], "cudaStreamCreateWithFlags", e);
    used[r].insert(streams[r]);
  }
  return {};
}

caf::error clique::impl::init_ranks(int world_size, int first_rank,
                                    const ncclUniqueId& id,
                                    wait_clock::time_point until,
                                    const std::string& what) {
  world = world_size;
  first = first_rank;
  {
    // One thread drives every local GPU: their inits in one group.
    group g;
    if (g.start_status() != ncclSuccess)
      return nccl_error("ncclGroupStart", g.start_status());
    for (int r = 0; r < n(); ++r) {
      cuda::device_guard guard{gpus[static_cast<size_t>(r)]};
      auto config = nonblocking_config();
      if (auto res = ncclCommInitRankConfig(&comms[static_cast<size_t>(r)],
                                            world_size, id, first_rank + r,
                                            &config);
          !accepted(res))
        return nccl_error("ncclCommInitRankConfig (rank "
                            + std::to_string(first_rank + r) + " of "
                            + std::to_string(world_size) + ")",
                          res);
    }
    if (auto res = g.end(); !accepted(res))
      return nccl_error(what + " (ncclGroupEnd)", res);
  }
  return settle(until, what);
}

caf::error clique::impl::settle(wait_clock::time_point until,
                                const std::string& what) {
  pollable_work work;
  work.poll = [this, &what]() -> caf::expected<poll_state> {
    auto state = poll_state::done;
    for (int r = 0; r < n(); ++r) {
      auto comm = comms[static_cast<size_t>(r)];
      if (comm == nullptr)
        continue;
      ncclResult_t async = ncclSuccess;
      if (auto res = ncclCommGetAsyncError(comm, &async); res != ncclSuccess)
        return nccl_error("ncclCommGetAsyncError", res, comm);
      if (async == ncclInProgress)
        state = poll_state::pending;
      else if (async != ncclSuccess)
        return nccl_error(what + ": rank " + std::to_string(first + r)
                            + " (cuda:"
                            + std::to_string(gpus[static_cast<size_t>(r)])
                            + ")",
                          async, comm);
    }
    return state;
  };
  work.abort = [this](const caf::error& why) { abort(why); };
  return wait_for_work(work, until, std::chrono::milliseconds{0},
                       "nccl clique: " + what)
    .error;
}

void clique::impl::abort(const caf::error& cause) {
  if (failure)
    return;
  failure = cause ? cause : make_error(errc::device_error, "aborted");
  for (size_t r = 0; r < comms.size(); ++r) {
    if (comms[r] == nullptr)
      continue;
    cuda::device_guard guard{gpus[r]};
    ncclCommAbort(comms[r]); // frees it; NCCL kernels in flight stop
    comms[r] = nullptr;
  }
}

namespace {

caf::error check_gpus(const std::vector<int>& gpus) {
  if (gpus.empty())
    return invalid("no GPUs");
  std::set<int> distinct(gpus.begin(), gpus.end());
  if (distinct.size() != gpus.size())
    return invalid("a GPU is listed twice: NCCL refuses two ranks on one GPU; "
                   "replicas sharing a GPU use the same-GPU path (device "
                   "copies and the reduce_and_apply kernel)");
  int count = 0;
  if (auto e = cudaGetDeviceCount(&count); e != cudaSuccess) {
    cudaGetLastError();
    return cuda::make_cuda_error(gpus.front(), "cannot count CUDA devices", e);
  }
  for (int g : gpus)
    if (g < 0 || g >= count)
      return make_error(errc::device_error,
                        "nccl clique: cuda:" + std::to_string(g)
                          + ": no such GPU (this machine has "
                          + std::to_string(count) + ")");
  return {};
}

} // namespace

caf::expected<std::unique_ptr<clique>>
clique::create(std::vector<int> gpus, wait_clock::time_point deadline) {
  if (auto err = check_gpus(gpus))
    return err;
  ncclUniqueId id;
  if (auto r = ncclGetUniqueId(&id); r != ncclSuccess)
    return nccl_error("ncclGetUniqueId", r);
  auto p = std::make_unique<impl>();
  p->gpus = std::move(gpus);
  if (auto err = p->open_streams())
    return err;
  const int n = p->n();
  if (auto err = p->init_ranks(n, 0, id, deadline,
                               "communicator over " + std::to_string(n)
                                 + " GPUs"))
    return err;
  return std::unique_ptr<clique>{new clique(std::move(p))};
}

int library_version() {
  int version = 0;
  if (ncclGetVersion(&version) != ncclSuccess)
    return 0;
  return version;
}

caf::expected<std::vector<std::byte>> new_unique_id() {
  ncclUniqueId id;
  if (auto r = ncclGetUniqueId(&id); r != ncclSuccess)
    return nccl_error("ncclGetUniqueId", r);
  static_assert(sizeof(id) == unique_id_bytes);
  std::vector<std::byte> out(sizeof(id));
  std::memcpy(out.data(), &id, sizeof(id));
  return out;
}

caf::expected<std::unique_ptr<clique>>
clique::join(std::vector<int> gpus, int world_size, int first_rank,
             std::span<const std::byte> id, wait_clock::time_point deadline) {
  if (gpus.empty())
    return invalid("no GPUs");
  if (id.size() != unique_id_bytes)
    return invalid("an NCCL unique id has " + std::to_string(unique_id_bytes)
                   + " bytes, found " + std::to_string(id.size()));
  if (first_rank < 0 || world_size < first_rank + static_cast<int>(gpus.size()))
    return invalid("ranks " + std::to_string(first_rank) + " to "
                   + std::to_string(first_rank + static_cast<int>(gpus.size()))
                   + " do not fit a communicator of "
                   + std::to_string(world_size));
  if (auto err = check_gpus(gpus))
    return err;
  ncclUniqueId uid;
  std::memcpy(&uid, id.data(), sizeof(uid));
  auto p = std::make_unique<impl>();
  p->gpus = std::move(gpus);
  p->joined = true;
  if (auto err = p->open_streams())
    return err;
  if (auto err = p->init_ranks(world_size, first_rank, uid, deadline,
                               "joining ranks "
                                 + std::to_string(first_rank) + "+ of "
                                 + std::to_string(world_size)))
    return err;
  return std::unique_ptr<clique>{new clique(std::move(p))};
}

clique::clique(std::unique_ptr<impl> p) : impl_(std::move(p)) {}

clique::~clique() = default;

int clique::world_size() const {
  return impl_->world;
}

int clique::first_rank() const {
  return impl_->first;
}

int clique::size() const {
  return impl_->n();
}

const std::vector<int>& clique::gpus() const {
  return impl_->gpus;
}

void* clique::stream(int rank) const {
  return static_cast<void*>(impl_->streams.at(static_cast<size_t>(rank)));
}

void clique::set_deadline(wait_clock::time_point deadline) {
  impl_->deadline = deadline;
}

caf::error clique::all_reduce(reduce_op op, dtype type,
                              std::span<const void* const> send,
                              std::span<void* const> recv, int64_t count,
                              std::span<void* const> streams) {
  if (auto err = impl_->begin_call(send.size(), recv.size(), streams))
    return err;
  auto nop = nccl_op(op, type);
  if (!nop)
    return std::move(nop.error());
  if (count <= 0)
    return {};
  const auto n = static_cast<size_t>(count);
  const bool wide = widened(op, type);
  const bool nan = impl::masks_nan(op, type);
  if (auto err = impl_->reserve_all(wide ? n * sizeof(float) : 0,
                                    nan ? n : 0, streams))
    return err;
  if (wide)
    if (auto err = impl_->widen(op, type, send, count, 0, streams))
      return err;
  if (nan)
    if (auto err = impl_->make_masks(type, send, count, 0, streams))
      return err;
  auto err = impl_->grouped(
    "ncclAllReduce", streams, [&](int r, ncclComm_t comm, cudaStream_t s) {
      auto i = static_cast<size_t>(r);
      if (wide) {
        float* w = impl_->wide_at(r, 0);
        return ncclAllReduce(w, w, n, ncclFloat32, *nop, comm, s);
      }
      auto res = ncclAllReduce(send[i], recv[i], n, nccl_type(type), *nop,
                               comm, s);
      if (accepted(res) && nan)
        res = ncclAllReduce(impl_->mask_at(r, 0), impl_->mask_at(r, 0), n,
                            ncclUint8, ncclMax, comm, s);
      return res;
    });
  if (err)
    return err;
  if (wide)
    return impl_->narrow(op, type, recv, count, 0, streams);
  if (nan)
    return impl_->apply_masks(type, recv, count, 0, streams);
  if (op != reduce_op::mean)
    return {};
  return impl_->divide_results(type, recv, count, streams);
}

caf::error clique::broadcast(dtype type, std::span<const void* const> send,
                             std::span<void* const> recv, int64_t count,
                             int root, std::span<void* const> streams) {
  if (auto err = impl_->begin_call(send.size(), recv.size(), streams))
    return err;
  if (root < 0 || root >= impl_->world)
    return invalid("broadcast root " + std::to_string(root) + " out of range");
  if (count <= 0)
    return {};
  return impl_->grouped("ncclBroadcast", streams,
                        [&](int r, ncclComm_t comm, cudaStream_t s) {
                          auto i = static_cast<size_t>(r);
                          return ncclBroadcast(send[i], recv[i],
                                               static_cast<size_t>(count),
                                               nccl_type(type), root, comm, s);
                        });
}

caf::error clique::all_gather(dtype type, std::span<const void* const> send,
                              std::span<void* const> recv, int64_t count,
                              std::span<void* const> streams) {
  if (auto err = impl_->begin_call(send.size(), recv.size(), streams))
    return err;
  if (count <= 0)
    return {};
  return impl_->grouped("ncclAllGather", streams,
                        [&](int r, ncclComm_t comm, cudaStream_t s) {
                          auto i = static_cast<size_t>(r);
                          return ncclAllGather(send[i], recv[i],
                                               static_cast<size_t>(count),
                                               nccl_type(type), comm, s);
                        });
}

caf::error clique::reduce(reduce_op op, dtype type,
                          std::span<const void* const> send,
                          std::span<void* const> recv, int64_t count, int root,
                          std::span<void* const> streams) {
  if (auto err = impl_->begin_call(send.size(), recv.size(), streams))
    return err;
  if (root < 0 || root >= impl_->world)
    return invalid("reduce root " + std::to_string(root) + " out of range");
  auto nop = nccl_op(op, type);
  if (!nop)
    return std::move(nop.error());
  if (count <= 0)
    return {};
  const auto n = static_cast<size_t>(count);
  const bool wide = widened(op, type);
  const bool nan = impl::masks_nan(op, type);
  if (auto err = impl_->reserve_all(wide ? n * sizeof(float) : 0,
                                    nan ? n : 0, streams))
    return err;
  if (wide)
    if (auto err = impl_->widen(op, type, send, count, 0, streams))
      return err;
  if (nan)
    if (auto err = impl_->make_masks(type, send, count, 0, streams))
      return err;
  auto err = impl_->grouped(
    "ncclReduce", streams, [&](int r, ncclComm_t comm, cudaStream_t s) {
      auto i = static_cast<size_t>(r);
      if (wide) {
        float* w = impl_->wide_at(r, 0);
        return ncclReduce(w, w, n, ncclFloat32, *nop, root, comm, s);
      }
      auto res = ncclReduce(send[i], recv[i], n, nccl_type(type), *nop, root,
                            comm, s);
      if (accepted(res) && nan)
        res = ncclReduce(impl_->mask_at(r, 0), impl_->mask_at(r, 0), n,
                         ncclUint8, ncclMax, root, comm, s);
      return res;
    });
  if (err)
    return err;
  std::vector<void*> at_root(static_cast<size_t>(impl_->n()), nullptr);
  const int local_root = root - impl_->first; // the root may be elsewhere
  if (local_root >= 0 && local_root < impl_->n())
    at_root[static_cast<size_t>(local_root)]
      = recv[static_cast<size_t>(local_root)];
  if (wide)
    return impl_->narrow(op, type, at_root, count, 0, streams);
  if (nan)
    return impl_->apply_masks(type, at_root, count, 0, streams);
  if (op != reduce_op::mean)
    return {};
  return impl_->divide_results(type, at_root, count, streams);
}

namespace {

/// One dtype's buffers in a batch: packed into staging (several buffers,
/// or widened 16-bit ones) or reduced in place (one buffer).
struct batch_group {
  dtype type;
  bool wide = false;
  std::vector<size_t> members;
  int64_t total = 0;
  size_t offset = 0;      // bytes into staging (packed groups)
  size_t mask_at = 0;     // bytes into the masks (min / max of floats)
  bool packed() const { return wide || members.size() > 1; }
  dtype reduced_type() const { return wide ? dtype::float32 : type; }
};

constexpr size_t align_up(size_t n) {
  return (n + 255) / 256 * 256;
}

/// Every packed group into staging (in: widened or copied) or back out of
/// it (rounded once, a mean divided, or copied).
caf::error pack(clique::impl& im, reduce_op op,
                std::span<const batch_group> groups,
                std::span<const std::vector<buffer>> per_rank,
                std::span<void* const> streams, bool in) {
  const int64_t divisor = op == reduce_op::mean ? im.world : 1;
  return im.each_rank(
    streams, in ? "batch pack" : "batch unpack",
    [&](int r, cudaStream_t s) -> cudaError_t {
      const auto i = static_cast<size_t>(r);
      for (const auto& g : groups) {
        if (!g.packed())
          continue;
        auto* base = reinterpret_cast<char*>(im.wide_at(r, g.offset));
        size_t at = 0;
        for (size_t k : g.members) {
          const auto& b = per_rank[i][k];
          void* slot = base + at;
          cudaError_t e;
          if (g.wide && in)
            e = cuda::launch_reduce_widen(widen_op(op), g.type,
                                          static_cast<float*>(slot), &b.data,
                                          1, b.count, s);
          else if (g.wide)
            e = cuda::launch_narrow(g.type, b.data,
                                    static_cast<const float*>(slot), divisor,
                                    b.count, s);
          else
            e = cudaMemcpyAsync(in ? slot : b.data, in ? b.data : slot,
                                static_cast<size_t>(b.count) * size_of(b.type),
                                cudaMemcpyDeviceToDevice, s);
          if (e != cudaSuccess)
            return e;
          at += static_cast<size_t>(b.count) * size_of(g.reduced_type());
        }
      }
      return cudaSuccess;
    });
}

} // namespace

caf::error clique::all_reduce_batch(reduce_op op,
                                    std::span<const std::vector<buffer>> per_rank,
                                    std::span<void* const> streams) {
  if (impl_->failure)
    return impl_->not_reused();
  const int n = impl_->n();
  if (per_rank.size() != static_cast<size_t>(n))
    return invalid("all_reduce_batch: expected one buffer list per rank ("
                   + std::to_string(n) + "), found "
                   + std::to_string(per_rank.size()));
  if (auto err = impl_->begin_call(per_rank.size(), per_rank.size(), streams))
    return err;
  const auto& first = per_rank[0];
  for (int r = 1; r < n; ++r) {
    const auto& list = per_rank[static_cast<size_t>(r)];
    if (list.size() != first.size())
      return invalid("all_reduce_batch: rank " + std::to_string(r) + " lists "
                     + std::to_string(list.size()) + " buffers, rank 0 lists "
                     + std::to_string(first.size()));
    for (size_t k = 0; k < list.size(); ++k)
      if (list[k].count != first[k].count || list[k].type != first[k].type)
        return invalid("all_reduce_batch: buffer " + std::to_string(k)
                       + " of rank " + std::to_string(r)
                       + " differs in count or dtype from rank 0");
  }
  // Group the buffers by dtype (in order of first appearance) and lay out
  // the packed groups in staging and the masked ones in the masks.
  std::vector<batch_group> groups;
  for (size_t k = 0; k < first.size(); ++k) {
    if (first[k].count < 0)
      return invalid("all_reduce_batch: negative count");
    if (first[k].count == 0)
      continue;
    auto i = std::find_if(groups.begin(), groups.end(), [&](const auto& g) {
      return g.type == first[k].type;
    });
    if (i == groups.end()) {
      groups.push_back({first[k].type, widened(op, first[k].type), {}, 0, 0, 0});
      i = groups.end() - 1;
    }
    i->members.push_back(k);
    i->total += first[k].count;
  }
  if (groups.empty())
    return {};
  std::vector<ncclRedOp_t> ops;
  size_t staging_bytes = 0;
  size_t mask_bytes = 0;
  for (auto& g : groups) {
    auto nop = nccl_op(op, g.type);
    if (!nop)
      return std::move(nop.error());
    ops.push_back(*nop);
    if (g.packed()) {
      g.offset = staging_bytes;
      staging_bytes += align_up(static_cast<size_t>(g.total)
                                * size_of(g.reduced_type()));
    }
    if (impl::masks_nan(op, g.type)) {
      g.mask_at = mask_bytes;
      mask_bytes += static_cast<size_t>(g.total);
    }
  }
  if (auto err = impl_->reserve_all(staging_bytes, mask_bytes, streams))
    return err;
  auto data_of = [&](const batch_group& g, int r) -> void* {
    return g.packed() ? static_cast<void*>(impl_->wide_at(r, g.offset))
                      : per_rank[static_cast<size_t>(r)][g.members[0]].data;
  };
  if (auto err = pack(*impl_, op, groups, per_rank, streams, true))
    return err;
  for (auto& g : groups) {
    if (!impl::masks_nan(op, g.type))
      continue;
    std::vector<const void*> data(static_cast<size_t>(n));
    for (int r = 0; r < n; ++r)
      data[static_cast<size_t>(r)] = data_of(g, r);
    if (auto err = impl_->make_masks(g.type, data, g.total, g.mask_at, streams))
      return err;
  }
  auto err = impl_->grouped(
    "ncclAllReduce (batch)", streams,
    [&](int r, ncclComm_t comm, cudaStream_t s) {
      for (size_t gi = 0; gi < groups.size(); ++gi) {
        const auto& g = groups[gi];
        void* data = data_of(g, r);
        const auto count = static_cast<size_t>(g.total);
        auto res = ncclAllReduce(data, data, count, nccl_type(g.reduced_type()),
                                 ops[gi], comm, s);
        if (accepted(res) && impl::masks_nan(op, g.type))
          res = ncclAllReduce(impl_->mask_at(r, g.mask_at),
                              impl_->mask_at(r, g.mask_at), count, ncclUint8,
                              ncclMax, comm, s);
        if (!accepted(res))
          return res;
      }
      return ncclSuccess;
    });
  if (err)
    return err;
  for (auto& g : groups) {
    std::vector<void*> data(static_cast<size_t>(n));
    for (int r = 0; r < n; ++r)
      data[static_cast<size_t>(r)] = data_of(g, r);
    if (impl::masks_nan(op, g.type)) {
      if (auto e = impl_->apply_masks(g.type, data, g.total, g.mask_at, streams))
        return e;
    } else if (op == reduce_op::mean && !g.wide) { // widened: when unpacked
      if (auto e = impl_->divide_results(g.type, data, g.total, streams))
        return e;
    }
  }
  return pack(*impl_, op, groups, per_rank, streams, false);
}

caf::error clique::synchronize(std::span<void* const> streams) {
  return wait(streams, wait_clock::time_point::max(),
              std::chrono::milliseconds{0})
    .error;
}

caf::error clique::async_error() {
  for (int r = 0; r < impl_->n(); ++r) {
    auto comm = impl_->comms[static_cast<size_t>(r)];
    if (comm == nullptr)
      continue;
    ncclResult_t async = ncclSuccess;
    if (auto res = ncclCommGetAsyncError(comm, &async); res != ncclSuccess)
      return nccl_error("ncclCommGetAsyncError", res, comm);
    if (async != ncclSuccess && async != ncclInProgress)
      return nccl_error("asynchronous error on rank "
                          + std::to_string(impl_->first + r) + " (cuda:"
                          + std::to_string(impl_->gpus[static_cast<size_t>(r)])
                          + ")",
                        async, comm);
  }
  return {};
}

void clique::abort(const caf::error& cause) {
  impl_->abort(cause);
}

const caf::error& clique::failure() const {
  return impl_->failure;
}

wait_outcome clique::wait(std::span<void* const> streams,
                          wait_clock::time_point deadline,
                          std::chrono::milliseconds grace) {
  if (impl_->failure) {
    wait_outcome out;
    out.error = impl_->not_reused();
    return out;
  }
  if (!streams.empty() && streams.size() != impl_->gpus.size()) {
    wait_outcome out;
    out.error = invalid("wait: expected one stream per rank or none");
    return out;
  }
  std::vector<cudaStream_t> waited;
  for (int r = 0; r < impl_->n(); ++r)
    waited.push_back(impl_->stream_for(streams, r));
  pollable_work work;
  work.poll = [&]() -> caf::expected<poll_state> {
    if (!impl_->failure) // aborted: only the streams are left to drain
      if (auto err = async_error())
        return err;
    return cuda::query_streams(impl_->gpus, waited, "nccl clique: stream");
  };
  work.abort = [this](const caf::error& why) { abort(why); };
  return wait_for_work(work, deadline, grace, "nccl collective");
}

} // namespace varsync::nccl
