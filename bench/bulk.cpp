// Rows 4 and 5: bulk updates of ON_WRITE float32 SUM variables in replica
// steps (the gradient all-reduce of data-parallel training).
//
// Row 4 (bulk): one variable of S bytes; every replica's step calls
// ctx.assign_add(v, grad[r]) where grad[r] is a per-replica contribution
// tensor built before the timed region (so the step measures the library, not
// the user's allocation). Figure: the median wall time of s.run(step) (the
// blocking API) over several steps, and the algorithm bandwidth S / time;
// also the process CPU time per step (all threads), which tells whether the
// replicas' workers ran in parallel.
//
// Row 5 (fusion): 1,000 variables of 1 KiB; one step updating all of them
// against 1,000 steps updating one each (the same 1,000 updates).
//
//   bulk [--quick] [--json FILE] [bulk|fusion]...
//   bulk profile-fused      (the fused step alone, 500 times, for perf)
//   bulk profile-bulk       (64 MiB, 2 replicas alone, ~5 s, for perf)

#include <cstdio>
#include <string>
#include <vector>

#include <caf/actor_system.hpp>

#include "bench/caf_setup.hpp"
#include "bench/common.hpp"
#include "varsync/varsync.hpp"

using namespace varsync;
using bench::clock_type;

namespace {

// Repetitions for a step that moves `bytes` per replica: about `budget`
// seconds at an assumed 2 GB/s, at least 5 and at most 200.
int reps_for(size_t bytes, int replicas, double budget) {
  double guess = 2.0 * replicas * static_cast<double>(bytes) / 2e9 + 50e-6;
  auto reps = static_cast<int>(budget / guess);
  return std::max(5, std::min(200, reps));
}

// only_64m: just 64 MiB with 2 replicas, many steps (for a profiler).
bool run_bulk(caf::actor_system& sys, bench::recorder& rec, bool quick,
              bool only_64m = false) {
  std::vector<size_t> sizes = {4u << 10, 64u << 10, 256u << 10, 1u << 20,
                               16u << 20, 64u << 20};
  if (!quick)
    sizes.push_back(256u << 20);
  // 1 replica at 512 KiB: half the data of 2 replicas at 1 MiB, the
  // reference of the parallelism target (two replicas' slices at once).
  std::vector<int> replica_counts = {1, 2, 4};
  double budget = quick ? 0.4 : 1.0;
  if (only_64m) {
    sizes = {64u << 20};
    replica_counts = {2};
    budget = 5.0;
  }
  for (int replicas : replica_counts) {
    auto sizes_here = sizes;
    if (replicas == 1 && !only_64m)
      sizes_here = {512u << 10};
    strategy_options options;
    options.devices = bench::host_devices(replicas);
    auto s = strategy::create(sys, options);
    if (!s) {
      std::fprintf(stderr, "%s\n", describe(s.error()).c_str());
      return false;
    }
    for (auto bytes : sizes_here) {
      auto count = static_cast<int64_t>(bytes / sizeof(float));
      auto v = s->create_variable("g" + std::to_string(bytes),
                                  tensor::zeros(dtype::float32, {count}),
                                  synchronization::on_write, aggregation::sum);
      if (!v) {
        std::fprintf(stderr, "%s\n", describe(v.error()).c_str());
        return false;
      }
      // Contributions built outside the timed region; small values so that
      // repeated steps stay finite.
      std::vector<tensor> grads;
      for (int r = 0; r < replicas; ++r)
        grads.push_back(
          tensor::filled(dtype::float32, {count}, 1.0 / (1 << 20) * (r + 1)));
      auto step = [&](replica_context& ctx) {
        (void) ctx.assign_add(*v, grads[static_cast<size_t>(ctx.replica_id())]);
      };
      auto reps = reps_for(bytes, replicas, budget);
      std::vector<double> secs;
      std::vector<double> cpus;
      for (int i = 0; i < reps + 2; ++i) {
        auto c0 = bench::process_cpu_seconds();
        auto t0 = clock_type::now();
        auto err = s->run(step);
        auto t = bench::seconds_since(t0);
        auto c = bench::process_cpu_seconds() - c0;
        if (err) {
          std::fprintf(stderr, "step failed: %s\n", describe(err).c_str());
          return false;
        }
        if (i >= 2) { // two warm-up steps
          secs.push_back(t);
          cpus.push_back(c);
        }
      }
      auto st = bench::summarize(secs);
      auto cpu = bench::summarize(cpus).median;
      std::printf("bulk %d replicas %8s: median %10.3f ms  min %10.3f ms  "
                  "algbw %7.2f GB/s  cpu %10.3f ms  (%d steps)\n",
                  replicas, bench::size_name(bytes).c_str(), st.median * 1e3,
                  st.min * 1e3, static_cast<double>(bytes) / st.median / 1e9,
                  cpu * 1e3, reps);
      std::fflush(stdout);
      rec.record("bulk.r" + std::to_string(replicas) + ".s"
                   + std::to_string(bytes),
                 st.median, "s",
                 {{"bytes", static_cast<double>(bytes)},
                  {"replicas", static_cast<double>(replicas)},
                  {"min", st.min},
                  {"p99", st.p99},
                  {"cpu", cpu},
                  {"n", static_cast<double>(st.n)}});
      (void) s->destroy(*v);
    }
    s->shutdown();
  }
  return true;
}

// only_fused: run just the fused step, many times (for a profiler).
bool run_fusion(caf::actor_system& sys, bench::recorder& rec, bool quick,
                bool only_fused = false) {
  const int vars = 1000;
  const int64_t count = 1024 / sizeof(float);
  for (int replicas : {2, 4}) {
    strategy_options options;
    options.devices = bench::host_devices(replicas);
    auto s = strategy::create(sys, options);
    if (!s) {
      std::fprintf(stderr, "%s\n", describe(s.error()).c_str());
      return false;
    }
    std::vector<variable> vs;
    for (int i = 0; i < vars; ++i) {
      auto v = s->create_variable("f" + std::to_string(i),
                                  tensor::zeros(dtype::float32, {count}),
                                  synchronization::on_write, aggregation::sum);
      if (!v) {
        std::fprintf(stderr, "%s\n", describe(v.error()).c_str());
        return false;
      }
      vs.push_back(*v);
    }
    std::vector<tensor> grads;
    for (int r = 0; r < replicas; ++r)
      grads.push_back(tensor::filled(dtype::float32, {count}, 1.0 / 1024));
    auto fused = [&](replica_context& ctx) {
      auto& g = grads[static_cast<size_t>(ctx.replica_id())];
      for (auto& v : vs)
        (void) ctx.assign_add(v, g);
    };
    auto one_by_one = [&] {
      for (auto& v : vs) {
        auto err = s->run([&](replica_context& ctx) {
          (void) ctx.assign_add(v, grads[static_cast<size_t>(ctx.replica_id())]);
        });
        if (err)
          return err;
      }
      return caf::error{};
    };
    if (only_fused) {
      auto t0 = clock_type::now();
      for (int i = 0; i < 500; ++i)
        (void) s->run(fused);
      std::printf("fusion %d replicas: %.3f ms per fused step (500 steps)\n",
                  replicas, bench::seconds_since(t0) / 500 * 1e3);
      s->shutdown();
      continue;
    }
    auto before = s->stats();
    int fused_reps = quick ? 10 : 30;
    int separate_reps = quick ? 2 : 5;
    std::vector<double> fused_secs;
    for (int i = 0; i < fused_reps + 2; ++i) {
      auto t0 = clock_type::now();
      auto err = s->run(fused);
      auto t = bench::seconds_since(t0);
      if (err) {
        std::fprintf(stderr, "fused step failed: %s\n", describe(err).c_str());
        return false;
      }
      if (i >= 2)
        fused_secs.push_back(t);
    }
    std::vector<double> separate_secs;
    for (int i = 0; i < separate_reps + 1; ++i) {
      auto t0 = clock_type::now();
      if (auto err = one_by_one()) {
        std::fprintf(stderr, "step failed: %s\n", describe(err).c_str());
        return false;
      }
      auto t = bench::seconds_since(t0);
      if (i >= 1)
        separate_secs.push_back(t);
    }
    auto after = s->stats();
    auto f = bench::summarize(fused_secs);
    auto sep = bench::summarize(separate_secs);
    double collectives = -1;
    if (before && after)
      collectives = static_cast<double>(after->collectives_run
                                        - before->collectives_run);
    std::printf("fusion %d replicas: one step x 1000 updates %9.3f ms, 1000 "
                "steps x 1 update %9.3f ms, ratio %6.1f (collectives run: "
                "%.0f)\n",
                replicas, f.median * 1e3, sep.median * 1e3,
                sep.median / f.median, collectives);
    std::fflush(stdout);
    auto tag = ".r" + std::to_string(replicas);
    rec.record("fusion.fused" + tag, f.median, "s",
               {{"min", f.min}, {"n", static_cast<double>(f.n)}});
    rec.record("fusion.separate" + tag, sep.median, "s",
               {{"min", sep.min}, {"n", static_cast<double>(sep.n)},
                {"collectives", collectives}});
    s->shutdown();
  }
  return true;
}

} // namespace

int main(int argc, char** argv) {
  auto opt = bench::parse_options(argc, argv);
  bench::recorder rec{opt.json};
  auto want = [&](const std::string& part) {
    if (opt.rest.empty())
      return true;
    for (auto& r : opt.rest)
      if (r == part)
        return true;
    return false;
  };
  caf::actor_system_config cfg;
  bench::configure(cfg);
  caf::actor_system sys{cfg};
  if (want("bulk") && !run_bulk(sys, rec, opt.quick))
    return 1;
  if (want("fusion") && !run_fusion(sys, rec, opt.quick))
    return 1;
  // Not part of the suite: one case alone, for a profiler.
  if (!opt.rest.empty() && opt.rest[0] == "profile-fused"
      && !run_fusion(sys, rec, opt.quick, true))
    return 1;
  if (!opt.rest.empty() && opt.rest[0] == "profile-bulk"
      && !run_bulk(sys, rec, opt.quick, true))
    return 1;
  return 0;
}
