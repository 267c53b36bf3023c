// A replica step that runs the user's own CUDA kernels on the replica's GPU
// (CUDA backend only). Every replica:
//   1. gets device pointers to its local components (no host round trip) and
//      its stream,
//   2. launches a "gradient" kernel on that stream: g = 0.5 * w + (r + 1),
//   3. adds g into its component of an ON_READ (sum) variable with another
//      kernel, writing the GPU memory directly (local, R1),
//   4. contributes g to an ON_WRITE (mean) update of the weights with
//      update_from_device; g stays on the GPU: on even steps the gradient
//      kernel writes into a contribution_buffer (no copy at all), on odd
//      steps into the user's own buffer (one device copy). The step's
//      collective waits for the kernels through the replica's step-done
//      event.
// Host replicas (cpu:K) in a mixed layout do the same arithmetic on the host
// through the same API (read, device_pointer, assign_sub). The host then
// checks the weights and the ON_READ sum against the same arithmetic done on
// the host.
//
//   cuda_step [--smoke] [--devices cuda:0,cuda:0|cpu:0,cuda:0] [--steps K]
//             [--size N]
//
// Exits with 77 (skipped) when no GPU is visible. Options are CAF options
// (--long-help lists them; --name value or --name=value).

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>

#include "cuda_step_kernels.hpp"
#include "example_main.hpp"
#include "varsync/config.hpp"
#include "varsync/ext/cuda_stream.hpp"
#include "varsync/varsync.hpp"

using namespace varsync;

namespace {

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos <= s.size()) {
    auto comma = s.find(',', pos);
    if (comma == std::string::npos)
      comma = s.size();
    out.push_back(s.substr(pos, comma - pos));
    pos = comma + 1;
  }
  return out;
}

int fail(const char* what, const caf::error& err) {
  std::fprintf(stderr, "cuda_step: %s: %s\n", what, describe(err).c_str());
  return 1;
}

struct cuda_step_options : caf::actor_system_config {
  bool smoke = false;
  std::vector<examples::flag> flags{{&smoke, "smoke"}};
  std::string devices = "cuda:0,cuda:0";
  int steps = 0;      // 0: 5, or 3 with --smoke
  int64_t size = 0;   // 0: 1 << 20, or 4096 with --smoke

  cuda_step_options() {
    register_types(*this);
    tune_scheduler(*this);
    set("logger.verbosity", caf::atom("quiet"));
    opt_group{custom_options_, "global"}
      .add<bool>("smoke", "a short run: 3 steps over 4096 elements")
      .add(devices, "devices", "comma-separated replica devices")
      .add(steps, "steps", "number of steps (default 5)")
      .add(size, "size", "elements per variable (default 1 << 20)");
  }
};

using config = examples::config<cuda_step_options>;

int run_example(caf::actor_system& sys, const config& cfg) {
  std::vector<std::string> devices = split(cfg.devices);
  int steps = cfg.steps > 0 ? cfg.steps : cfg.smoke ? 3 : 5;
  int64_t n = cfg.size > 0 ? cfg.size : cfg.smoke ? 4096 : int64_t{1} << 20;
  if (cfg.steps < 0 || cfg.size < 0 || !cfg.remainder.empty()) {
    std::fprintf(stderr,
                 "usage: cuda_step [--smoke] [--devices cuda:0,cuda:0|"
                 "cpu:0,cuda:0] "
                 "[--steps K] [--size N]\n");
    return 2;
  }
  // Only a machine without a GPU skips; a broken GPU machine fails.
  auto gpus = cuda_gpu_count();
  if (!gpus)
    return fail("cuda_gpu_count", gpus.error());
  if (*gpus == 0) {
    std::printf("cuda_step: SKIPPED: no CUDA GPU on this machine\n");
    return 77;
  }
  strategy_options options;
  options.devices = devices;
  options.timeout = std::chrono::seconds(60);
  auto s = strategy::create(sys, options);
  if (!s)
    return fail("strategy::create", s.error());
  std::printf("%s\n", s->description().c_str());
  const int replicas = s->num_replicas();

  auto weights = s->create_variable("weights",
                                    tensor::zeros(dtype::float32, {n}),
                                    synchronization::on_write,
                                    aggregation::mean);
  if (!weights)
    return fail("create weights", weights.error());
  auto seen = s->create_variable("gradient_sum",
                                 tensor::zeros(dtype::float32, {n}),
                                 synchronization::on_read, aggregation::sum);
  if (!seen)
    return fail("create gradient_sum", seen.error());

  // The user's own per-replica scratch buffer, on each GPU replica's GPU.
  std::vector<float*> grad(static_cast<size_t>(replicas), nullptr);
  for (int r = 0; r < replicas; ++r) {
    auto id = parse_device(devices[static_cast<size_t>(r)]);
    if (!id) {
      std::fprintf(stderr, "cuda_step: bad device '%s'\n",
                   devices[static_cast<size_t>(r)].c_str());
      return 2;
    }
    if (id->kind != device_kind::cuda)
      continue;
    if (cudaSetDevice(id->index) != cudaSuccess
        || cudaMalloc(&grad[static_cast<size_t>(r)],
                      static_cast<size_t>(n) * sizeof(float))
             != cudaSuccess) {
      std::fprintf(stderr, "cuda_step: cudaMalloc failed\n");
      return 1;
    }
  }

  for (int step = 0; step < steps; ++step) {
    auto err = s->run([&](replica_context& ctx) {
      auto r = ctx.replica_id();
      if (ctx.device().kind == device_kind::host) {
        // A host replica: the same arithmetic, on its host components.
        auto w = ctx.read(*weights);
        auto acc = ctx.device_pointer(*seen);
        if (!w || !acc)
          throw std::runtime_error("read / device_pointer failed");
        auto g = tensor::empty(dtype::float32, {n});
        auto* gp = g.mutable_data<float>();
        for (int64_t i = 0; i < n; ++i) {
          volatile float half = 0.5f * w->as<float>()[i];
          gp[i] = half + static_cast<float>(r + 1);
          acc->as<float>()[i] += gp[i];
        }
        if (auto e = ctx.assign_sub(*weights, g))
          throw std::runtime_error(describe(e));
        return;
      }
      // Even steps write the gradient straight into a contribution buffer
      // (the collective reduces it where it is); odd steps use the user's
      // own buffer, which update_from_device copies on the device.
      auto* g = grad[static_cast<size_t>(r)];
      if (step % 2 == 0) {
        auto buf = ctx.contribution_buffer(*weights);
        if (!buf)
          throw std::runtime_error(describe(buf.error()));
        g = buf->as<float>();
      }
      if (use_replica_gpu(ctx) != cudaSuccess)
        throw std::runtime_error("cudaSetDevice failed");
      auto w = ctx.device_pointer(*weights);
      auto acc = ctx.device_pointer(*seen);
      if (!w || !acc)
        throw std::runtime_error("device_pointer failed");
      void* stream = ctx.stream().native;
      if (example::launch_gradient(g, w->as<float>(), n, r, stream) != 0
          || example::launch_accumulate(acc->as<float>(), g, n, stream) != 0)
        throw std::runtime_error("kernel launch failed");
      if (auto e = ctx.update_from_device(*weights, update_op::assign_sub, g))
        throw std::runtime_error(describe(e));
    });
    if (err)
      return fail("run", err);
  }

  // The same arithmetic on the host (float, no contraction).
  float w = 0.0f;
  float sum = 0.0f;
  std::vector<float> acc(static_cast<size_t>(replicas), 0.0f);
  for (int step = 0; step < steps; ++step) {
    float total = 0.0f;
    for (int r = 0; r < replicas; ++r) {
      volatile float half = 0.5f * w;
      float g = half + static_cast<float>(r + 1);
      acc[static_cast<size_t>(r)] += g;
      total += g;
    }
    w -= total / static_cast<float>(replicas);
  }
  for (float a : acc)
    sum += a;

  auto got_w = s->read(*weights);
  auto got_sum = s->read(*seen);
  if (!got_w)
    return fail("read weights", got_w.error());
  if (!got_sum)
    return fail("read gradient_sum", got_sum.error());
  int bad = 0;
  for (int64_t i = 0; i < n; ++i) {
    auto a = static_cast<float>(got_w->as_double(i));
    auto b = static_cast<float>(got_sum->as_double(i));
    if (std::fabs(a - w) > 1e-5f * std::max(1.0f, std::fabs(w))
        || std::fabs(b - sum) > 1e-5f * std::max(1.0f, std::fabs(sum)))
      ++bad;
  }
  for (auto* g : grad)
    cudaFree(g);
  std::printf("weights[0] = %g (expected %g), gradient_sum[0] = %g (expected "
              "%g), %d of %lld elements off\n",
              got_w->as_double(0), static_cast<double>(w),
              got_sum->as_double(0), static_cast<double>(sum), bad,
              static_cast<long long>(n));
  auto stats = s->stats();
  if (stats)
    std::printf("collective: %s; collectives run: %llu\n",
                stats->collective.c_str(),
                static_cast<unsigned long long>(stats->collectives_run));
  return bad == 0 ? 0 : 1;
}

} // namespace

int caf_main(caf::actor_system& sys, const config& cfg) {
  return run_example(sys, cfg);
}

VARSYNC_MAIN()
