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
// Row 4b (parallel): the parallelism target (two replicas at 1 MiB against
// one at 512 KiB) and the small step (1 KiB on 1, 2, 4 and 8 replicas), each
// beside its floor measured in the same rounds: the plain kernel on threads
// that spin between rounds (no actor, no message, no wake-up), and a bare
// CAF relay that runs a small step's two fan-out rounds for a scoped_actor.
// The rounds alternate the cases, so that every figure sees the same state
// of the machine; the report takes the median of the rounds' medians.
//
//   bulk [--quick] [--json FILE] [bulk|fusion|parallel]...
//   bulk profile-fused      (the fused step alone, 500 times, for perf)
//   bulk profile-bulk       (64 MiB, 2 replicas alone, ~5 s, for perf)

#include <atomic>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/scoped_actor.hpp>

#include "bench/caf_setup.hpp"
#include "bench/host_strategy.hpp"
#include "bench/common.hpp"
#include "bench/event_loop.hpp"
#include "bench/plain_kernels.hpp"
#include "varsync/actor_api.hpp"
#include "varsync/function_step.hpp"
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
  // (The parallelism target's one-replica reference is in run_parallel.)
  std::vector<int> replica_counts = {2, 4};
  double budget = quick ? 0.4 : 1.0;
  if (only_64m) {
    sizes = {64u << 20};
    replica_counts = {2};
    budget = 5.0;
  }
  for (int replicas : replica_counts) {
    auto s = bench::host_strategy(sys, replicas);
    if (!s)
      return false;
    for (auto bytes : sizes) {
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
    auto s = bench::host_strategy(sys, replicas);
    if (!s)
      return false;
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

// -- Row 4b: parallel slices and the small step, with their floors ------------

void spin_pause() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// Median seconds of `reps` rounds of slice(0) on this thread and slice(1) on
// a second thread that spins between rounds: two slices at once with no
// wake-up in between, the best two threads do.
template <class Slice>
double median_two_threads(int reps, Slice slice) {
  std::atomic<int> go{0};
  std::atomic<int> done{0};
  std::atomic<bool> stop{false};
  std::thread helper([&] {
    int seen = 0;
    while (!stop.load(std::memory_order_acquire)) {
      int round = go.load(std::memory_order_acquire);
      if (round == seen) {
        spin_pause();
        continue;
      }
      seen = round;
      slice(1);
      done.store(round, std::memory_order_release);
    }
  });
  std::vector<double> secs;
  for (int i = 1; i <= reps + 2; ++i) {
    auto t0 = clock_type::now();
    go.store(i, std::memory_order_release);
    slice(0);
    while (done.load(std::memory_order_acquire) != i)
      spin_pause();
    if (i > 2)
      secs.push_back(bench::seconds_since(t0));
  }
  stop.store(true, std::memory_order_release);
  helper.join();
  return bench::summarize(secs).median;
}

template <class Work>
double median_one_thread(int reps, Work work) {
  std::vector<double> secs;
  for (int i = 0; i < reps + 2; ++i) {
    auto t0 = clock_type::now();
    work();
    if (i >= 2)
      secs.push_back(bench::seconds_since(t0));
  }
  return bench::summarize(secs).median;
}

// One strategy with one ON_WRITE SUM float32 variable of `bytes` and the
// replicas' contributions, built before any round.
struct step_case {
  step_case(int replicas, size_t bytes) : replicas(replicas), bytes(bytes) {}

  int replicas;
  size_t bytes;
  std::optional<strategy> s;
  std::optional<variable> v;
  std::vector<tensor> grads;

  bool open(caf::actor_system& sys) {
    s = bench::host_strategy(sys, replicas);
    if (!s)
      return false;
    auto count = static_cast<int64_t>(bytes / sizeof(float));
    auto made_v = s->create_variable("p", tensor::zeros(dtype::float32, {count}),
                                     synchronization::on_write,
                                     aggregation::sum);
    if (!made_v) {
      std::fprintf(stderr, "%s\n", describe(made_v.error()).c_str());
      return false;
    }
    v = *made_v;
    for (int r = 0; r < replicas; ++r)
      grads.push_back(
        tensor::filled(dtype::float32, {count}, 1.0 / (1 << 20) * (r + 1)));
    return true;
  }

  // Median seconds per step (blocking API, as row 4) and CPU seconds per
  // step (all threads); nullopt if a step failed.
  std::optional<std::pair<double, double>> time_steps(int reps) {
    auto step = [this](replica_context& ctx) {
      (void) ctx.assign_add(*v, grads[static_cast<size_t>(ctx.replica_id())]);
    };
    std::vector<double> secs;
    auto c0 = bench::process_cpu_seconds();
    for (int i = 0; i < reps + 2; ++i) {
      if (i == 2)
        c0 = bench::process_cpu_seconds();
      auto t0 = clock_type::now();
      if (auto err = s->run(step)) {
        std::fprintf(stderr, "step failed: %s\n", describe(err).c_str());
        return std::nullopt;
      }
      if (i >= 2)
        secs.push_back(bench::seconds_since(t0));
    }
    auto cpu = (bench::process_cpu_seconds() - c0) / reps;
    return std::make_pair(bench::summarize(secs).median, cpu);
  }
};

// A bare CAF relay that answers a request after `rounds` fan-out/gather
// rounds over `echoes`: a small step's shape (the replicas' reports, then
// the combined update) without varsync.
caf::actor spawn_relay(caf::actor_system& sys, std::vector<caf::actor> echoes,
                       int rounds) {
  return sys.spawn([echoes, rounds](caf::event_based_actor* self)
                     -> caf::behavior {
    return {[self, echoes, rounds](int x) {
      auto rp = self->make_response_promise();
      auto fan_out = std::make_shared<std::function<void(int)>>();
      *fan_out = [self, echoes, rp, fan_out](int left) mutable {
        if (left == 0) {
          rp.deliver(0);
          *fan_out = nullptr; // breaks the cycle
          return;
        }
        auto pending = std::make_shared<size_t>(echoes.size());
        for (auto& e : echoes)
          self->request(e, caf::infinite, left)
            .then([fan_out, pending, left](int) {
              if (--*pending == 0)
                (*fan_out)(left - 1);
            });
      };
      (*fan_out)(rounds);
      (void) x;
      return rp;
    }};
  });
}

bool run_parallel(caf::actor_system& sys, bench::recorder& rec, bool quick) {
  const int rounds = quick ? 3 : 7;
  const int reps = quick ? 100 : 300;
  const int kernel_reps = quick ? 200 : 1000;
  const size_t half = size_t{512} << 10;
  const size_t full = size_t{1} << 20;
  step_case one(1, half);
  step_case two(2, full);
  if (!one.open(sys) || !two.open(sys))
    return false;
  std::vector<step_case> small;
  for (int n : {1, 2, 4, 8})
    small.emplace_back(n, 1024);
  for (auto& c : small)
    if (!c.open(sys))
      return false;
  // The plain kernels' arrays (zeros: the sums stay finite), in one block,
  // each 64 bytes further from a page boundary than the one before: arrays
  // at the same offset within their pages would slow the loads that follow
  // a store (4 KiB aliasing) and understate the floor.
  const size_t n1 = half / sizeof(float);
  const size_t n2 = full / sizeof(float);
  std::vector<float> block(n1 * 2 + n2 * 4 + 6 * 16);
  std::vector<float*> arrays;
  for (size_t i = 0, at = 0; i < 6; ++i) {
    at += 16; // 64 bytes
    arrays.push_back(block.data() + at);
    at += i < 2 ? n1 : n2;
  }
  float* c1 = arrays[0];
  float* g1 = arrays[1];
  auto plain_two = [&](size_t lo, size_t hi) {
    bench::onepass2(arrays[2], arrays[3], arrays[4], arrays[5], lo, hi);
  };
  // The small step's floor: a scoped_actor's request to a two-round relay.
  auto echo = [](caf::event_based_actor*) -> caf::behavior {
    return {[](int x) { return x; }};
  };
  std::vector<caf::actor> relays;
  std::vector<caf::actor> all_echoes;
  for (auto& c : small) {
    std::vector<caf::actor> echoes;
    for (int r = 0; r < c.replicas; ++r)
      echoes.push_back(sys.spawn(echo));
    all_echoes.insert(all_echoes.end(), echoes.begin(), echoes.end());
    relays.push_back(spawn_relay(sys, echoes, 2));
  }
  caf::scoped_actor self{sys};
  std::printf("parallel slices and the small step: %d rounds\n", rounds);
  for (int round = 1; round <= rounds; ++round) {
    auto a = one.time_steps(reps);
    auto b = two.time_steps(reps);
    if (!a || !b)
      return false;
    double k1 = median_one_thread(kernel_reps, [&] {
      bench::plain_add(c1, g1, 0, n1);
    });
    double k2 = median_two_threads(kernel_reps, [&](int t) {
      plain_two(t == 0 ? 0 : n2 / 2, t == 0 ? n2 / 2 : n2);
    });
    double k2_serial = median_one_thread(kernel_reps, [&] {
      plain_two(0, n2);
    });
    std::printf("round %d: varsync 1 rep 512 KiB %7.1f us, 2 rep 1 MiB %7.1f "
                "us (cpu %7.1f us); plain kernel 1 thread 512 KiB %6.1f us, "
                "2 threads 1 MiB %6.1f us, 1 thread 1 MiB %6.1f us\n",
                round, a->first * 1e6, b->first * 1e6, b->second * 1e6,
                k1 * 1e6, k2 * 1e6, k2_serial * 1e6);
    rec.record("parallel.step.r1.s524288", a->first, "s",
               {{"cpu", a->second}, {"n", static_cast<double>(reps)}});
    rec.record("parallel.step.r2.s1048576", b->first, "s",
               {{"cpu", b->second}, {"n", static_cast<double>(reps)}});
    rec.record("parallel.kernel.r1.s524288", k1, "s");
    rec.record("parallel.kernel.r2.s1048576", k2, "s", {{"threads", 2}});
    rec.record("parallel.kernel.serial.r2.s1048576", k2_serial, "s",
               {{"threads", 1}});
    std::printf("         1 KiB step, blocking API / actor API (us):");
    for (size_t i = 0; i < small.size(); ++i) {
      auto& c = small[i];
      auto t = c.time_steps(reps);
      if (!t)
        return false;
      auto floor = bench::time_calls_us(reps, 10, [&] {
        self->request(relays[i], caf::infinite, 1)
          .receive([](int) {}, [](caf::error&) {});
      });
      // The same step and floor from an event-based caller: no thread of
      // the caller to wake.
      auto fn = [&c](replica_context& ctx) {
        (void) ctx.assign_add(*c.v, c.grads[static_cast<size_t>(ctx.replica_id())]);
      };
      auto step = make_step(fn, c.replicas);
      auto coordinator = coordinator_of(*c.s);
      bool failed = false;
      auto actor = bench::event_based_loop(sys, reps * 4, 20,
                                           [&](auto* a, auto done) {
        a->request(coordinator, caf::infinite, run_atom::value, step)
          .then([done](ok_atom) { done(); },
                [done, &failed](caf::error&) {
                  failed = true;
                  done();
                });
      });
      if (failed) {
        std::fprintf(stderr, "an actor-API step failed\n");
        return false;
      }
      auto actor_floor = bench::event_based_loop(sys, reps * 4, 20,
                                                 [&](auto* a, auto done) {
        a->request(relays[i], caf::infinite, 1).then([done](int) { done(); });
      });
      auto tag = ".r" + std::to_string(c.replicas);
      std::printf(" %d rep %5.1f (floor %5.1f) / %5.1f (floor %5.1f)",
                  c.replicas, t->first * 1e6, floor.median, actor.median,
                  actor_floor.median);
      rec.record("smallstep" + tag + ".s1024", t->first * 1e6, "us",
                 {{"n", static_cast<double>(reps)}});
      rec.latency("smallstep.floor" + tag, floor);
      rec.latency("smallstep.actor" + tag + ".s1024", actor);
      rec.latency("smallstep.actor.floor" + tag, actor_floor);
    }
    std::printf("\n");
    std::fflush(stdout);
  }
  for (auto& r : relays)
    caf::anon_send_exit(r, caf::exit_reason::user_shutdown);
  for (auto& e : all_echoes)
    caf::anon_send_exit(e, caf::exit_reason::user_shutdown);
  one.s->shutdown();
  two.s->shutdown();
  for (auto& c : small)
    c.s->shutdown();
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
  if (want("parallel") && !run_parallel(sys, rec, opt.quick))
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
