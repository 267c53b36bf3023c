// GPU all-reduce benchmark (CUDA backend only; figures from an H100 in
// docs/cuda.md, "Verified on a GPU").
//
// Sizes 1 KiB .. 1 GiB (x4 steps) of float32, sum, in this order:
//
// 1. copy bandwidth B: cudaMemcpyAsync device-to-device of the largest size
//    on GPU 0, B = 2 * S / t (bytes read + bytes written), best of 10.
// 2. same-GPU path, N logical replicas of GPU 0 (--replicas, default 2 and
//    4): same_device_all_reduce with N separate contribution buffers and N
//    component buffers (the step update of N replicas sharing one GPU), for
//    assign (HBM bound 2 * N * S bytes at B) and assign_add on mirrored
//    components as a step applies it (bound 3 * N * S, the traffic of
//    updating N components; the mirrored kernel moves (2N+1) * S); reported: time, achieved bytes/s, fraction
//    of the bound (target >= 80% from 64 MiB).
// 3. NCCL path over every visible GPU (a clique of one on a one-GPU machine):
//    nccl::clique::all_reduce (varsync's path: argument checks, its group,
//    its streams) against a bare ncclAllReduce group on the same buffers and
//    communicators of the same kind (ncclCommInitAll); reported: both times,
//    algbw / busbw (nccl-tests' definitions) and varsync's overhead (target
//    <= 5% from 1 MiB, judged with two GPUs or more: on one the all-reduce
//    moves nothing).
// 4. whole strategy, N = 1, 2, 4 logical replicas of cuda:0: one replica
//    step whose every replica contributes a device buffer to an ON_WRITE sum
//    assign_add (contribution_buffer: no copy; and, for N = 2, the step's
//    own buffer: one device copy), up to --strategy-max (default 256 MiB),
//    against 3 * N * S bytes at the copy bandwidth (target >= 80% from
//    64 MiB), and against section 2's kernel for the same N and size: the
//    step's fixed cost (target <= 20 us).
//
// Times are medians of wall-clock samples, each ending with the GPUs
// synchronized. Nothing is asserted: targets print as pass/MISS. Exits 77
// without a GPU.
//
//   gpu_allreduce [--quick] [--json FILE] [--max-bytes N] [--replicas N]...
//                 [--strategy-max N] [--iters N] [--scheduler-threads N]
//                 [--strategy-only]

#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <cuda_runtime.h>
#include <nccl.h>

#include "../common.hpp"
#include "devices/cuda/cuda_device.hpp"
#include "sync/nccl/nccl_clique.hpp"
#include "sync/nccl/same_device_reduce.hpp"
#include "varsync/varsync.hpp"

using namespace varsync;

namespace {

#define CHECK_CUDA(expr)                                                       \
  do {                                                                         \
    cudaError_t e_ = (expr);                                                   \
    if (e_ != cudaSuccess) {                                                   \
      std::fprintf(stderr, "%s: %s\n", #expr, cudaGetErrorString(e_));         \
      std::exit(1);                                                            \
    }                                                                          \
  } while (false)

#define CHECK_NCCL(expr)                                                       \
  do {                                                                         \
    ncclResult_t r_ = (expr);                                                  \
    if (r_ != ncclSuccess) {                                                   \
      std::fprintf(stderr, "%s: %s\n", #expr, ncclGetErrorString(r_));         \
      std::exit(1);                                                            \
    }                                                                          \
  } while (false)

void check(const caf::error& err, const char* what) {
  if (err) {
    std::fprintf(stderr, "%s: %s\n", what, describe(err).c_str());
    std::exit(1);
  }
}

int iterations_for(size_t bytes, int fixed) {
  if (fixed > 0)
    return fixed;
  // ~256 MiB of payload per size, between 5 and 200 samples.
  auto n = static_cast<long long>((size_t{256} << 20) / std::max<size_t>(bytes, 1));
  return static_cast<int>(std::clamp<long long>(n, 5, 200));
}

double copy_bandwidth(size_t bytes) {
  CHECK_CUDA(cudaSetDevice(0));
  void* a = nullptr;
  void* b = nullptr;
  CHECK_CUDA(cudaMalloc(&a, bytes));
  CHECK_CUDA(cudaMalloc(&b, bytes));
  CHECK_CUDA(cudaMemset(a, 1, bytes));
  cudaStream_t s;
  CHECK_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaEvent_t t0, t1;
  CHECK_CUDA(cudaEventCreate(&t0));
  CHECK_CUDA(cudaEventCreate(&t1));
  float best_ms = 1e30f;
  for (int i = 0; i < 12; ++i) {
    CHECK_CUDA(cudaEventRecord(t0, s));
    CHECK_CUDA(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, s));
    CHECK_CUDA(cudaEventRecord(t1, s));
    CHECK_CUDA(cudaEventSynchronize(t1));
    float ms = 0;
    CHECK_CUDA(cudaEventElapsedTime(&ms, t0, t1));
    if (i >= 2) // two warm-ups
      best_ms = std::min(best_ms, ms);
  }
  cudaEventDestroy(t0);
  cudaEventDestroy(t1);
  cudaStreamDestroy(s);
  cudaFree(a);
  cudaFree(b);
  return 2.0 * static_cast<double>(bytes) / (best_ms * 1e-3);
}

std::vector<size_t> sizes_up_to(size_t max_bytes) {
  std::vector<size_t> out;
  for (size_t s = 1024; s <= max_bytes; s *= 4)
    out.push_back(s);
  return out;
}

const char* mark(bool ok) { return ok ? "pass" : "MISS"; }

// -- 2. same GPU ----------------------------------------------------------------

/// The kernel alone (same_device_all_reduce, assign_add, mirrored) by
/// (replicas, bytes), measured in this run: what a whole step costs over it
/// is the step's fixed cost (section 4).
std::map<std::pair<int, size_t>, double> kernel_add_us;

void same_gpu(int replicas, update_op uop, const std::vector<size_t>& sizes,
              double bw, int fixed_iters, bench::recorder& rec) {
  auto dev = cuda_device::open(0);
  if (!dev)
    check(dev.error(), "cuda_device::open(0)");
  // assign: read N contributions, write N components; assign_add also
  // reads the N components.
  const double passes = uop == update_op::assign ? 2.0 : 3.0;
  // assign_add as a step applies it: mirrored components (the kernel reads
  // component 0 only, (2N+1)*S moved), against the 3*N*S.
  const bool mirrored = uop != update_op::assign;
  std::printf("\nsame-GPU path, %d logical replicas of cuda:0 "
              "(same_device_all_reduce, sum, %s%s; bound %g*N*S)\n", replicas,
              std::string{to_string(uop)}.c_str(),
              mirrored ? ", mirrored" : "", passes);
  std::printf("%10s %12s %12s %12s %8s %s\n", "size", "median us",
              "bound us", "GB/s", "of bound", "target (>=80% from 64 MiB)");
  for (auto bytes : sizes) {
    const auto count = static_cast<int64_t>(bytes / sizeof(float));
    std::vector<void*> contrib, comps;
    for (int r = 0; r < replicas; ++r) {
      auto c = (*dev)->allocate(bytes);
      auto d = (*dev)->allocate(bytes);
      if (!c || !d) {
        std::printf("%10s out of memory, stopping\n",
                    bench::size_name(bytes).c_str());
        for (auto* p : contrib) (*dev)->release(p);
        for (auto* p : comps) (*dev)->release(p);
        if (c) (*dev)->release(*c);
        if (d) (*dev)->release(*d);
        return;
      }
      // On the device's stream, which the pool blocks were allocated on
      // (the legacy stream is not ordered with it).
      auto stream = static_cast<cudaStream_t>((*dev)->native_stream());
      CHECK_CUDA(cudaMemsetAsync(*c, 0, bytes, stream));
      CHECK_CUDA(cudaMemsetAsync(*d, 0, bytes, stream));
      contrib.push_back(*c);
      comps.push_back(*d);
    }
    check((*dev)->synchronize(), "synchronize");
    std::vector<const void*> in(contrib.begin(), contrib.end());
    auto call = [&] {
      check(same_device_all_reduce(**dev, reduce_op::sum, uop,
                                   dtype::float32, in, comps, count, mirrored),
            "same_device_all_reduce");
      check((*dev)->synchronize(), "synchronize");
    };
    auto st = bench::time_calls_us(iterations_for(bytes, fixed_iters), 2, call);
    const double moved = passes * replicas * static_cast<double>(bytes);
    const double bound_us = moved / bw * 1e6;
    const double frac = bound_us / st.median;
    const bool gated = bytes >= (size_t{64} << 20);
    std::printf("%10s %12.1f %12.1f %12.1f %7.1f%% %s\n",
                bench::size_name(bytes).c_str(), st.median, bound_us,
                moved / (st.median * 1e-6) / 1e9, 100 * frac,
                gated ? mark(frac >= 0.8) : "-");
    rec.latency(std::string{"gpu.same_gpu."}
                  + (uop == update_op::assign ? "" : "add.") + "r"
                  + std::to_string(replicas) + ".s" + std::to_string(bytes),
                st, {{"bound_us", std::to_string(bound_us)}});
    if (uop == update_op::assign_add)
      kernel_add_us[{replicas, bytes}] = st.median;
    for (auto* p : contrib) (*dev)->release(p);
    for (auto* p : comps) (*dev)->release(p);
  }
}

// -- 3. NCCL ----------------------------------------------------------------------

void nccl_path(int gpus, const std::vector<size_t>& sizes, int fixed_iters,
               bench::recorder& rec) {
  std::vector<int> ids;
  for (int g = 0; g < gpus; ++g)
    ids.push_back(g);
  auto clique = nccl::clique::create(ids);
  if (!clique)
    check(clique.error(), "nccl::clique::create");
  std::vector<ncclComm_t> comms(static_cast<size_t>(gpus));
  CHECK_NCCL(ncclCommInitAll(comms.data(), gpus, ids.data()));
  std::vector<cudaStream_t> streams(static_cast<size_t>(gpus));
  for (int g = 0; g < gpus; ++g) {
    CHECK_CUDA(cudaSetDevice(g));
    CHECK_CUDA(cudaStreamCreateWithFlags(&streams[static_cast<size_t>(g)],
                                         cudaStreamNonBlocking));
  }
  std::vector<void*> stream_handles(streams.begin(), streams.end());
  std::printf("\nNCCL path over %d GPU(s): nccl::clique::all_reduce vs bare "
              "ncclAllReduce (in place, sum, float32, same buffers and "
              "streams)\n", gpus);
  // On one GPU the all-reduce moves nothing: both sides are a launch, and
  // the overhead target (a fraction of the transfer) has no meaning.
  const bool judged = gpus > 1;
  std::printf("%10s %12s %12s %10s %10s %9s %s\n", "size", "varsync us",
              "bare us", "algbw GB/s", "busbw GB/s", "overhead",
              judged ? "target (<=5% from 1 MiB)"
                     : "target (<=5% from 1 MiB; n/a on one GPU)");
  for (auto bytes : sizes) {
    const auto count = static_cast<int64_t>(bytes / sizeof(float));
    std::vector<void*> bufs(static_cast<size_t>(gpus));
    bool oom = false;
    for (int g = 0; g < gpus; ++g) {
      CHECK_CUDA(cudaSetDevice(g));
      if (cudaMalloc(&bufs[static_cast<size_t>(g)], bytes) != cudaSuccess) {
        cudaGetLastError();
        oom = true;
        break;
      }
      CHECK_CUDA(cudaMemset(bufs[static_cast<size_t>(g)], 0, bytes));
    }
    if (oom) {
      std::printf("%10s out of memory, stopping\n",
                  bench::size_name(bytes).c_str());
      for (auto* p : bufs)
        if (p) cudaFree(p);
      break;
    }
    std::vector<const void*> send(bufs.begin(), bufs.end());
    auto ours = [&] {
      check((*clique)->all_reduce(reduce_op::sum, dtype::float32, send, bufs,
                                  count, stream_handles),
            "clique::all_reduce");
      check((*clique)->synchronize(stream_handles), "clique::synchronize");
    };
    auto bare = [&] {
      CHECK_NCCL(ncclGroupStart());
      for (int g = 0; g < gpus; ++g) {
        auto i = static_cast<size_t>(g);
        CHECK_NCCL(ncclAllReduce(bufs[i], bufs[i], static_cast<size_t>(count),
                                 ncclFloat32, ncclSum, comms[i], streams[i]));
      }
      CHECK_NCCL(ncclGroupEnd());
      for (int g = 0; g < gpus; ++g) {
        CHECK_CUDA(cudaSetDevice(g));
        CHECK_CUDA(cudaStreamSynchronize(streams[static_cast<size_t>(g)]));
      }
    };
    const int n = iterations_for(bytes, fixed_iters);
    // Interleaved halves, so that drift hits both alike.
    auto a1 = bench::time_calls_us(n / 2 + 1, 2, ours);
    auto b1 = bench::time_calls_us(n / 2 + 1, 2, bare);
    auto a2 = bench::time_calls_us(n / 2 + 1, 0, ours);
    auto b2 = bench::time_calls_us(n / 2 + 1, 0, bare);
    const double t_ours = 0.5 * (a1.median + a2.median);
    const double t_bare = 0.5 * (b1.median + b2.median);
    const double overhead = t_ours / t_bare - 1.0;
    const double algbw = static_cast<double>(bytes) / (t_ours * 1e-6) / 1e9;
    const double busbw = gpus > 1 ? algbw * 2.0 * (gpus - 1) / gpus : algbw;
    const bool gated = judged && bytes >= (size_t{1} << 20);
    std::printf("%10s %12.1f %12.1f %10.1f %10.1f %8.1f%% %s\n",
                bench::size_name(bytes).c_str(), t_ours, t_bare, algbw, busbw,
                100 * overhead,
                gated ? mark(overhead <= 0.05) : judged ? "-" : "n/a");
    rec.record("gpu.nccl.g" + std::to_string(gpus) + ".s"
                 + std::to_string(bytes),
               t_ours, "us", {{"bare_us", t_bare}, {"overhead", overhead},
                              {"busbw_gbs", busbw}});
    for (auto* p : bufs)
      cudaFree(p);
  }
  for (int g = 0; g < gpus; ++g) {
    ncclCommDestroy(comms[static_cast<size_t>(g)]);
    cudaStreamDestroy(streams[static_cast<size_t>(g)]);
  }
}

// -- 4. whole strategy ---------------------------------------------------------------

/// One replica step per sample: every replica contributes a device buffer
/// to an ON_WRITE sum assign_add of a float32 variable on N logical
/// replicas of cuda:0. zero_copy: the buffer comes from contribution_buffer
/// (no copy); else from the step's own buffer (update_from_device copies it
/// on the device). The buffers are not written: the step's own kernels are
/// not what is measured. Bound: 3 * N * S bytes at the copy bandwidth
/// (read N contributions, read and write N components).
void strategy_path(const std::vector<size_t>& sizes, size_t max_bytes,
                   double bw, int fixed_iters, int replicas, bool zero_copy,
                   size_t threads, bench::recorder& rec) {
  strategy_options o;
  o.devices.assign(static_cast<size_t>(replicas), "cuda:0");
  o.scheduler_threads = threads;
  o.timeout = std::chrono::seconds(120);
  auto s = strategy::create(o);
  if (!s)
    check(s.error(), "strategy::create");
  std::printf("\nwhole strategy, %d replica%s of cuda:0, %zu scheduler "
              "threads, ON_WRITE sum assign_add from %s: %s\n",
              replicas, replicas == 1 ? "" : "s",
              threads != 0 ? threads : size_t{std::thread::hardware_concurrency()},
              zero_copy ? "contribution_buffer (no copy)"
                        : "the step's own buffer (one device copy)",
              s->description().c_str());
  std::printf("%10s %12s %12s %8s %12s %12s %s\n", "size", "median us",
              "bound us", "of bound", "kernel us", "over kernel",
              "targets (>=80% from 64 MiB; <=20 us over the kernel)");
  const std::string key = std::string{"gpu.strategy."}
                          + (zero_copy ? "buffer" : "copy") + ".r"
                          + std::to_string(replicas) + ".s";
  for (auto bytes : sizes) {
    if (bytes > max_bytes)
      break;
    const auto count = static_cast<int64_t>(bytes / sizeof(float));
    auto v = s->create_variable("w" + std::to_string(bytes),
                                tensor::zeros(dtype::float32, {count}),
                                synchronization::on_write, aggregation::sum);
    if (!v)
      check(v.error(), "create_variable");
    std::vector<void*> grads(static_cast<size_t>(replicas), nullptr);
    CHECK_CUDA(cudaSetDevice(0));
    if (!zero_copy)
      for (auto& g : grads) {
        CHECK_CUDA(cudaMalloc(&g, bytes));
        CHECK_CUDA(cudaMemset(g, 0, bytes));
      }
    auto call = [&] {
      check(s->run([&](replica_context& ctx) {
        const void* data = grads[static_cast<size_t>(ctx.replica_id())];
        if (zero_copy) {
          auto buf = ctx.contribution_buffer(*v);
          if (!buf)
            throw std::runtime_error(describe(buf.error()));
          data = buf->data;
        }
        if (auto e = ctx.update_from_device(*v, update_op::assign_add, data))
          throw std::runtime_error(describe(e));
      }), "run");
    };
    auto st = bench::time_calls_us(iterations_for(bytes, fixed_iters), 2, call);
    const double bound_us =
      3.0 * replicas * static_cast<double>(bytes) / bw * 1e6;
    const double frac = bound_us / st.median;
    auto kernel = kernel_add_us.find({replicas, bytes});
    const double kernel_us = kernel == kernel_add_us.end() ? -1 : kernel->second;
    const double over = kernel_us < 0 ? -1 : st.median - kernel_us;
    const std::string bound_mark
      = bytes >= (size_t{64} << 20) ? mark(frac >= 0.8) : "-";
    std::printf("%10s %12.1f %12.1f %7.1f%% %12.1f %12.1f %s / %s\n",
                bench::size_name(bytes).c_str(), st.median, bound_us,
                100 * frac, kernel_us, over, bound_mark.c_str(),
                over < 0 ? "-" : mark(over <= 20.0));
    rec.latency(key + std::to_string(bytes), st,
                {{"bound_us", std::to_string(bound_us)},
                 {"of_bound", std::to_string(frac)},
                 {"kernel_us", std::to_string(kernel_us)},
                 {"over_kernel_us", std::to_string(over)}});
    for (auto* g : grads)
      if (g != nullptr)
        cudaFree(g);
    check(s->destroy(*v), "destroy");
  }
}

} // namespace

int main(int argc, char** argv) {
  auto opts = bench::parse_options(argc, argv);
  size_t max_bytes = opts.quick ? (size_t{64} << 20) : (size_t{1} << 30);
  size_t strategy_max = size_t{256} << 20;
  int fixed_iters = 0;
  size_t threads = 0; // the strategy's own default: one per core
  bool strategy_only = false;
  std::vector<int> replica_counts;
  for (size_t i = 0; i < opts.rest.size(); ++i) {
    const auto& a = opts.rest[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= opts.rest.size()) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return opts.rest[++i];
    };
    if (a == "--max-bytes")
      max_bytes = std::strtoull(next().c_str(), nullptr, 10);
    else if (a == "--strategy-max")
      strategy_max = std::strtoull(next().c_str(), nullptr, 10);
    else if (a == "--replicas")
      replica_counts.push_back(std::atoi(next().c_str()));
    else if (a == "--iters")
      fixed_iters = std::atoi(next().c_str());
    else if (a == "--scheduler-threads")
      threads = std::strtoull(next().c_str(), nullptr, 10);
    else if (a == "--strategy-only")
      strategy_only = true;
    else {
      std::fprintf(stderr,
                   "usage: gpu_allreduce [--quick] [--json FILE] [--max-bytes "
                   "N] [--replicas N]... [--strategy-max N] [--iters N] "
                   "[--scheduler-threads N] [--strategy-only]\n");
      return 2;
    }
  }
  if (replica_counts.empty())
    replica_counts = {1, 2, 4};
  auto probe = cuda_gpu_count();
  if (!probe) {
    std::fprintf(stderr, "gpu_allreduce: %s\n", describe(probe.error()).c_str());
    return 1;
  }
  int gpus = *probe;
  if (gpus == 0) {
    std::printf("gpu_allreduce: SKIPPED: no CUDA GPU on this machine\n");
    return 77;
  }
  cudaDeviceProp prop{};
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  std::printf("gpu_allreduce: %d GPU(s), GPU 0: %s, %.1f GiB\n", gpus,
              prop.name, static_cast<double>(prop.totalGlobalMem) / (1 << 30));
  bench::recorder rec(opts.json);
  auto sizes = sizes_up_to(max_bytes);
  const double bw = copy_bandwidth(std::max<size_t>(max_bytes, size_t{64} << 20));
  std::printf("device-to-device copy bandwidth (GPU 0, %s, read + write): "
              "%.1f GB/s\n",
              bench::size_name(std::max<size_t>(max_bytes, size_t{64} << 20)).c_str(),
              bw / 1e9);
  rec.record("gpu.copy_bandwidth", bw / 1e9, "GB/s",
             {}, {{"gpu", prop.name}});
  if (!strategy_only) {
    for (auto uop : {update_op::assign, update_op::assign_add})
      for (int n : replica_counts)
        if (n > 1 || uop == update_op::assign_add) // the kernel of r1's step
          same_gpu(n, uop, sizes, bw, fixed_iters, rec);
    nccl_path(gpus, sizes, fixed_iters, rec);
  }
  for (int n : {1, 2, 4})
    strategy_path(sizes, strategy_max, bw, fixed_iters, n, true, threads, rec);
  strategy_path(sizes, strategy_max, bw, fixed_iters, 2, false, threads, rec);
  return 0;
}
