#include "sync/nccl/nccl_clique.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
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
/// per result (divide_results), as the host computes it: ncclAvg would
/// multiply by 1/N rounded to the dtype, a bias for 16-bit floats (1/3 in
/// float16 is 0.2% off).
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

} // namespace

struct clique::impl {
  std::vector<int> gpus;
  /// The communicator's ranks in all processes, and the global rank of
  /// this process's first (local rank r is global rank first + r).
  int world = 0;
  int first = 0;
  std::vector<ncclComm_t> comms;
  std::vector<cudaStream_t> streams;
  std::vector<void*> staging;       // per rank, for all_reduce_batch
  std::vector<size_t> staging_size; // bytes
  std::vector<void*> masks;         // per rank: NaN masks of min / max
  std::vector<size_t> mask_size;    // bytes
  /// Set by abort(): the communicators are gone, the clique is not reused.
  caf::error failure;

  ~impl() {
    for (size_t r = 0; r < gpus.size(); ++r) {
      cuda::device_guard guard{gpus[r]};
      if (failure && r < streams.size() && streams[r] != nullptr
          && cudaStreamQuery(streams[r]) == cudaErrorNotReady) {
        cudaGetLastError();
        continue; // aborted work that never drained: leave its memory be
      }
      if (r < streams.size() && streams[r] != nullptr)
        cudaStreamSynchronize(streams[r]);
      if (r < comms.size() && comms[r] != nullptr)
        ncclCommDestroy(comms[r]);
      if (r < staging.size() && staging[r] != nullptr)
        cudaFree(staging[r]);
      if (r < masks.size() && masks[r] != nullptr)
        cudaFree(masks[r]);
      if (r < streams.size() && streams[r] != nullptr)
        cudaStreamDestroy(streams[r]);
    }
  }

  int n() const { return static_cast<int>(gpus.size()); }

  caf::error not_reused() const {
    return make_error(errc::device_error,
                      "nccl clique: the communicator was aborted ("
                        + describe(failure) + ") and is never reused");
  }

  /// The per-rank slots and one non-blocking stream per GPU.
  caf::error open_streams() {
    const auto count = gpus.size();
    comms.assign(count, nullptr);
    streams.assign(count, nullptr);
    staging.assign(count, nullptr);
    staging_size.assign(count, 0);
    masks.assign(count, nullptr);
    mask_size.assign(count, 0);
    for (size_t r = 0; r < count; ++r) {
      cuda::device_guard guard{gpus[r]};
      if (guard.status() != cudaSuccess)
        return cuda::make_cuda_error(gpus[r], "cudaSetDevice", guard.status());
      if (auto e = cudaStreamCreateWithFlags(&streams[r],
                                             cudaStreamNonBlocking);
          e != cudaSuccess)
        return cuda::make_cuda_error(gpus[r], "cudaStreamCreateWithFlags", e);
    }
    return {};
  }

  /// The stream of rank r for this call.
  cudaStream_t stream_for(std::span<void* const> given, int r) const {
    return given.empty() ? streams[static_cast<size_t>(r)]
                         : static_cast<cudaStream_t>(given[static_cast<size_t>(r)]);
  }

  caf::error check_spans(size_t send, size_t recv,
                         std::span<void* const> given) const {
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
    return {};
  }

  /// The second half of a mean: every local rank's result (null: none on
  /// that rank) divided by the rank count (all processes') on its stream.
  caf::error divide_results(dtype type, std::span<void* const> results,
                            int64_t count, std::span<void* const> given) {
    for (int r = 0; r < n(); ++r) {
      void* data = results[static_cast<size_t>(r)];
      if (data == nullptr)
        continue;
      const int gpu = gpus[static_cast<size_t>(r)];
      cuda::device_guard guard{gpu};
      if (guard.status() != cudaSuccess)
        return cuda::make_cuda_error(gpu, "cudaSetDevice", guard.status());
      if (auto e = cuda::launch_divide(type, data, world, count,
                                       stream_for(given, r));
          e != cudaSuccess)
        return cuda::make_cuda_error(gpu, "mean: division kernel", e);
    }
    return {};
  }

  /// Runs issue(r, comm, stream) for every rank inside one NCCL group.
  template <class F>
  caf::error grouped(std::string_view what, std::span<void* const> given,
                     F&& issue) {
    group g;
    if (g.start_status() != ncclSuccess)
      return nccl_error("ncclGroupStart", g.start_status());
    for (int r = 0; r < n(); ++r) {
      auto res = issue(r, comms[static_cast<size_t>(r)], stream_for(given, r));
      if (res != ncclSuccess)
        return nccl_error(std::string{what} + " (rank " + std::to_string(r)
                            + ", cuda:" + std::to_string(gpus[static_cast<size_t>(r)])
                            + ")",
                          res, comms[static_cast<size_t>(r)]);
    }
    if (auto res = g.end(); res != ncclSuccess)
      return nccl_error(std::string{what} + " (ncclGroupEnd)", res);
    return {};
  }

  /// Grows rank r's buffer of `bufs` (staging or masks) to at least
  /// `bytes`.
  caf::error reserve(std::vector<void*>& bufs, std::vector<size_t>& sizes,
                     int r, size_t bytes, const char* what) {
    auto i = static_cast<size_t>(r);
    if (sizes[i] >= bytes)
      return {};
    cuda::device_guard guard{gpus[i]};
    if (guard.status() != cudaSuccess)
      return cuda::make_cuda_error(gpus[i], "cudaSetDevice", guard.status());
    if (bufs[i] != nullptr) {
      cudaDeviceSynchronize(); // any stream of this clique may still use it
      cudaFree(bufs[i]);
      bufs[i] = nullptr;
      sizes[i] = 0;
    }
    if (auto e = cudaMalloc(&bufs[i], bytes); e != cudaSuccess) {
      cudaGetLastError();
      bufs[i] = nullptr;
      return cuda::make_cuda_error(gpus[i], what, e);
    }
    sizes[i] = bytes;
    return {};
  }

  caf::error reserve_staging(int r, size_t bytes) {
    return reserve(staging, staging_size, r, bytes,
                   "nccl staging buffer (cudaMalloc)");
  }

  /// NCCL's min and max drop NaN; the host kernels propagate it. So a
  /// floating min / max also max-reduces a byte mask of NaNs (made from the
  /// inputs, applied to the results): a quarter of float32's traffic.
  static bool masks_nan(reduce_op op, dtype t) {
    return (op == reduce_op::min || op == reduce_op::max) && is_floating(t);
  }

  /// Every local rank's NaN mask of `count` elements at data[r], at byte
  /// `at` of its mask buffer (grown to at + count first).
  caf::error make_masks(dtype type, std::span<const void* const> data,
                        int64_t count, size_t at,
                        std::span<void* const> given) {
    for (int r = 0; r < n(); ++r) {
      const auto i = static_cast<size_t>(r);
      if (auto err = reserve(masks, mask_size, r,
                             at + static_cast<size_t>(count),
                             "nccl NaN mask (cudaMalloc)"))
        return err;
      cuda::device_guard guard{gpus[i]};
      if (auto e = cuda::launch_nan_mask(type, data[i],
                                         static_cast<uint8_t*>(masks[i]) + at,
                                         count, stream_for(given, r));
          e != cudaSuccess)
        return cuda::make_cuda_error(gpus[i], "NaN mask kernel", e);
    }
    return {};
  }

  /// The reduced masks onto the results (null: no result on that rank).
  caf::error apply_masks(dtype type, std::span<void* const> results,
                         int64_t count, size_t at,
                         std::span<void* const> given) {
    for (int r = 0; r < n(); ++r) {
      const auto i = static_cast<size_t>(r);
      if (results[i] == nullptr)
        continue;
      cuda::device_guard guard{gpus[i]};
      if (auto e = cuda::launch_apply_nan_mask(
            type, results[i], static_cast<uint8_t*>(masks[i]) + at, count,
            stream_for(given, r));
          e != cudaSuccess)
        return cuda::make_cuda_error(gpus[i], "NaN mask kernel", e);
    }
    return {};
  }

  uint8_t* mask_at(int r, size_t at) const {
    return static_cast<uint8_t*>(masks[static_cast<size_t>(r)]) + at;
  }
};

caf::expected<std::unique_ptr<clique>> clique::create(std::vector<int> gpus) {
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
  auto p = std::make_unique<impl>();
  p->gpus = std::move(gpus);
  const auto n = p->gpus.size();
  p->world = static_cast<int>(n);
  if (auto err = p->open_streams())
    return err;
  if (auto r = ncclCommInitAll(p->comms.data(), static_cast<int>(n),
                               p->gpus.data());
      r != ncclSuccess) {
    std::fill(p->comms.begin(), p->comms.end(), nullptr);
    return nccl_error("ncclCommInitAll over " + std::to_string(n) + " GPUs", r);
  }
  return std::unique_ptr<clique>{new clique(std::move(p))};
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
             std::span<const std::byte> id) {
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
  std::set<int> distinct(gpus.begin(), gpus.end());
  if (distinct.size() != gpus.size())
    return invalid("a GPU is listed twice: NCCL refuses two ranks on one GPU");
  ncclUniqueId uid;
  std::memcpy(&uid, id.data(), sizeof(uid));
  auto p = std::make_unique<impl>();
  p->gpus = std::move(gpus);
  p->world = world_size;
  p->first = first_rank;
  const auto n = p->gpus.size();
  if (auto err = p->open_streams())
    return err;
  // One thread drives every local GPU: their inits in one group.
  {
    group g;
    if (g.start_status() != ncclSuccess)
      return nccl_error("ncclGroupStart", g.start_status());
    for (size_t r = 0; r < n; ++r) {
      cuda::device_guard guard{p->gpus[r]};
      if (auto res = ncclCommInitRank(&p->comms[r], world_size, uid,
                                      first_rank + static_cast<int>(r));
          res != ncclSuccess) {
        std::fill(p->comms.begin(), p->comms.end(), nullptr);
        return nccl_error("ncclCommInitRank (rank "
                            + std::to_string(first_rank + static_cast<int>(r))
                            + " of " + std::to_string(world_size) + ")",
                          res);
      }
    }
    if (auto res = g.end(); res != ncclSuccess) {
      std::fill(p->comms.begin(), p->comms.end(), nullptr);
      return nccl_error("ncclCommInitRank (ncclGroupEnd)", res);
    }
  }
  return std::unique_ptr<clique>{new clique(std::move(p))};
}

int clique::world_size() const {
  return impl_->world;
}

int clique::first_rank() const {
  return impl_->first;
}

clique::clique(std::unique_ptr<impl> p) : impl_(std::move(p)) {}

clique::~clique() = default;

int clique::size() const {
  return impl_->n();
}

const std::vector<int>& clique::gpus() const {
  return impl_->gpus;
}

void* clique::stream(int rank) const {
  return static_cast<void*>(impl_->streams.at(static_cast<size_t>(rank)));
}

caf::error clique::all_reduce(reduce_op op, dtype type,
                              std::span<const void* const> send,
                              std::span<void* const> recv, int64_t count,
                              std::span<void* const> streams) {
  if (auto err = impl_->check_spans(send.size(), recv.size(), streams))
    return err;
  auto nop = nccl_op(op, type);
  if (!nop)
    return std::move(nop.error());
  if (count <= 0)
    return {};
  const bool nan = impl::masks_nan(op, type);
  if (nan)
    if (auto err = impl_->make_masks(type, send, count, 0, streams))
      return err;
  auto err = impl_->grouped(
    "ncclAllReduce", streams, [&](int r, ncclComm_t comm, cudaStream_t s) {
      auto i = static_cast<size_t>(r);
      auto res = ncclAllReduce(send[i], recv[i], static_cast<size_t>(count),
                               nccl_type(type), *nop, comm, s);
      if (res == ncclSuccess && nan)
        res = ncclAllReduce(impl_->mask_at(r, 0), impl_->mask_at(r, 0),
                            static_cast<size_t>(count), ncclUint8, ncclMax,
                            comm, s);
      return res;
    });
  if (err)
    return err;
  if (nan)
    return impl_->apply_masks(type, recv, count, 0, streams);
  if (op != reduce_op::mean)
    return {};
  return impl_->divide_results(type, recv, count, streams);
}

caf::error clique::broadcast(dtype type, std::span<const void* const> send,
                             std::span<void* const> recv, int64_t count,
                             int root, std::span<void* const> streams) {
  if (auto err = impl_->check_spans(send.size(), recv.size(), streams))
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
  if (auto err = impl_->check_spans(send.size(), recv.size(), streams))
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
  if (auto err = impl_->check_spans(send.size(), recv.size(), streams))
    return err;
  if (root < 0 || root >= impl_->world)
    return invalid("reduce root " + std::to_string(root) + " out of range");
  auto nop = nccl_op(op, type);
  if (!nop)
    return std::move(nop.error());
  if (count <= 0)
    return {};
  const bool nan = impl::masks_nan(op, type);
  if (nan)
    if (auto err = impl_->make_masks(type, send, count, 0, streams))
      return err;
  auto err = impl_->grouped(
    "ncclReduce", streams, [&](int r, ncclComm_t comm, cudaStream_t s) {
      auto i = static_cast<size_t>(r);
      auto res = ncclReduce(send[i], recv[i], static_cast<size_t>(count),
                            nccl_type(type), *nop, root, comm, s);
      if (res == ncclSuccess && nan)
        res = ncclReduce(impl_->mask_at(r, 0), impl_->mask_at(r, 0),
                         static_cast<size_t>(count), ncclUint8, ncclMax, root,
                         comm, s);
      return res;
    });
  if (err)
    return err;
  std::vector<void*> at_root(static_cast<size_t>(impl_->n()), nullptr);
  const int local_root = root - impl_->first; // the root may be elsewhere
  if (local_root >= 0 && local_root < impl_->n())
    at_root[static_cast<size_t>(local_root)]
      = recv[static_cast<size_t>(local_root)];
  if (nan)
    return impl_->apply_masks(type, at_root, count, 0, streams);
  if (op != reduce_op::mean)
    return {};
  return impl_->divide_results(type, at_root, count, streams);
}

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
  if (!streams.empty() && streams.size() != static_cast<size_t>(n))
    return invalid("all_reduce_batch: expected one stream per rank or none");
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
  // Group the buffers by dtype (in order of first appearance within each
  // dtype) and lay out each multi-buffer group in the staging buffer.
  struct group_plan {
    dtype type;
    std::vector<size_t> members;
    int64_t total = 0;
    size_t offset = 0; // bytes into staging (multi-buffer groups only)
  };
  std::vector<group_plan> groups;
  for (size_t k = 0; k < first.size(); ++k) {
    if (first[k].count < 0)
      return invalid("all_reduce_batch: negative count");
    if (first[k].count == 0)
      continue;
    auto i = std::find_if(groups.begin(), groups.end(), [&](const auto& g) {
      return g.type == first[k].type;
    });
    if (i == groups.end()) {
      groups.push_back({first[k].type, {}, 0, 0});
      i = groups.end() - 1;
    }
    i->members.push_back(k);
    i->total += first[k].count;
  }
  std::vector<ncclRedOp_t> ops;
  size_t staging_bytes = 0;
  for (auto& g : groups) {
    auto nop = nccl_op(op, g.type);
    if (!nop)
      return std::move(nop.error());
    ops.push_back(*nop);
    if (g.members.size() > 1) {
      g.offset = staging_bytes;
      staging_bytes += (static_cast<size_t>(g.total) * size_of(g.type) + 255)
                       / 256 * 256;
    }
  }
  if (groups.empty())
    return {};
  auto copy_all = [&](bool pack) -> caf::error {
    for (int r = 0; r < n; ++r) {
      const auto i = static_cast<size_t>(r);
      cuda::device_guard guard{impl_->gpus[i]};
      if (guard.status() != cudaSuccess)
        return cuda::make_cuda_error(impl_->gpus[i], "cudaSetDevice",
                                     guard.status());
      auto s = impl_->stream_for(streams, r);
      for (const auto& g : groups) {
        if (g.members.size() < 2)
          continue;
        auto* base = static_cast<char*>(impl_->staging[i]) + g.offset;
        size_t at = 0;
        for (size_t k : g.members) {
          const auto& b = per_rank[i][k];
          const size_t bytes = static_cast<size_t>(b.count) * size_of(b.type);
          auto e = pack ? cudaMemcpyAsync(base + at, b.data, bytes,
                                          cudaMemcpyDeviceToDevice, s)
                        : cudaMemcpyAsync(b.data, base + at, bytes,
                                          cudaMemcpyDeviceToDevice, s);
          if (e != cudaSuccess)
            return cuda::make_cuda_error(impl_->gpus[i],
                                         pack ? "batch pack (cudaMemcpyAsync)"
                                              : "batch unpack (cudaMemcpyAsync)",
                                         e);
          at += bytes;
        }
      }
    }
    return {};
  };
  if (staging_bytes > 0) {
    for (int r = 0; r < n; ++r)
      if (auto err = impl_->reserve_staging(r, staging_bytes))
        return err;
    if (auto err = copy_all(true))
      return err;
  }
  // The data each group reduces on rank r (packed, or its one buffer).
  auto data_of = [&](const group_plan& g, int r) -> void* {
    const auto i = static_cast<size_t>(r);
    return g.members.size() > 1
             ? static_cast<char*>(impl_->staging[i]) + g.offset
             : per_rank[i][g.members[0]].data;
  };
  // Floating min / max: NaN masks, one slice per group (impl::masks_nan).
  constexpr size_t unmasked = SIZE_MAX;
  std::vector<size_t> mask_at(groups.size(), unmasked);
  size_t mask_bytes = 0;
  for (size_t gi = 0; gi < groups.size(); ++gi)
    if (impl::masks_nan(op, groups[gi].type)) {
      mask_at[gi] = mask_bytes;
      mask_bytes += static_cast<size_t>(groups[gi].total);
    }
  if (mask_bytes > 0) {
    for (int r = 0; r < n; ++r) // all slices first: growing drops contents
      if (auto err = impl_->reserve(impl_->masks, impl_->mask_size, r,
                                    mask_bytes, "nccl NaN mask (cudaMalloc)"))
        return err;
    for (size_t gi = 0; gi < groups.size(); ++gi) {
      if (mask_at[gi] == unmasked)
        continue;
      std::vector<const void*> data(static_cast<size_t>(n));
      for (int r = 0; r < n; ++r)
        data[static_cast<size_t>(r)] = data_of(groups[gi], r);
      if (auto err = impl_->make_masks(groups[gi].type, data,
                                       groups[gi].total, mask_at[gi], streams))
        return err;
    }
  }
  auto err = impl_->grouped(
    "ncclAllReduce (batch)", streams,
    [&](int r, ncclComm_t comm, cudaStream_t s) {
      for (size_t gi = 0; gi < groups.size(); ++gi) {
        const auto& g = groups[gi];
        void* data = data_of(g, r);
        auto res = ncclAllReduce(data, data, static_cast<size_t>(g.total),
                                 nccl_type(g.type), ops[gi], comm, s);
        if (res == ncclSuccess && mask_at[gi] != unmasked)
          res = ncclAllReduce(impl_->mask_at(r, mask_at[gi]),
                              impl_->mask_at(r, mask_at[gi]),
                              static_cast<size_t>(g.total), ncclUint8,
                              ncclMax, comm, s);
        if (res != ncclSuccess)
          return res;
      }
      return ncclSuccess;
    });
  if (err)
    return err;
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    if (mask_at[gi] == unmasked)
      continue;
    std::vector<void*> data(static_cast<size_t>(n));
    for (int r = 0; r < n; ++r)
      data[static_cast<size_t>(r)] = data_of(groups[gi], r);
    if (auto e = impl_->apply_masks(groups[gi].type, data, groups[gi].total,
                                    mask_at[gi], streams))
      return e;
  }
  if (op == reduce_op::mean) // the division, on the fused data
    for (size_t gi = 0; gi < groups.size(); ++gi) {
      const auto& g = groups[gi];
      std::vector<void*> data(static_cast<size_t>(n));
      for (int r = 0; r < n; ++r) {
        const auto i = static_cast<size_t>(r);
        data[i] = g.members.size() > 1
                    ? static_cast<char*>(impl_->staging[i]) + g.offset
                    : per_rank[i][g.members[0]].data;
      }
      if (auto e = impl_->divide_results(g.type, data, g.total, streams))
        return e;
    }
  if (staging_bytes > 0)
    return copy_all(false);
  return {};
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
  if (impl_->failure)
    return;
  impl_->failure = cause ? cause
                         : make_error(errc::device_error, "aborted");
  for (size_t r = 0; r < impl_->comms.size(); ++r) {
    if (impl_->comms[r] == nullptr)
      continue;
    cuda::device_guard guard{impl_->gpus[r]};
    ncclCommAbort(impl_->comms[r]); // frees it; NCCL kernels in flight stop
    impl_->comms[r] = nullptr;
  }
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
