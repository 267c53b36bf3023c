// Metrics (M1-M4): what counting costs when nobody reads the figures. The
// control-plane rows (a blocking cross-replica scalar assign, a step with one
// scalar update, 16 async assigns in flight) with collect_metrics on (the
// default: counts, a clock read per collective and per step reply) against
// collect_metrics off (counts only) in the same run, alternating rounds so
// that drift of the shared machine hits both alike. Counting itself cannot
// be switched off (a few increments); a cross-replica assign runs the same
// code either way, so its ratio shows the noise. Then what a snapshot costs
// with 1,000 variables. Ratio = on / off (1.0: free). The flight recorder
// (M7: on across processes, opt-in in one process) is measured the same way,
// strategy_options::flight_recorder on against off.
//
//   metrics_overhead [--quick] [--json FILE]

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <functional>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>

#include "bench/caf_setup.hpp"
#include "bench/common.hpp"
#include "varsync/varsync.hpp"

using namespace varsync;
using bench::clock_type;

namespace {

struct layout {
  strategy s;
  variable w;
};

// What a comparison switches: metrics' timing or the flight recorder.
enum class feature { metrics, flight };

std::optional<layout> make(caf::actor_system& sys, int replicas, feature f,
                           bool on) {
  strategy_options options;
  options.devices = bench::host_devices(replicas);
  if (f == feature::metrics)
    options.collect_metrics = on;
  else
    options.flight_recorder = on;
  auto s = strategy::create(sys, options);
  if (!s) {
    std::fprintf(stderr, "%s\n", describe(s.error()).c_str());
    return std::nullopt;
  }
  auto w = s->create_variable("w", tensor::scalar<float>(0),
                              synchronization::on_write, aggregation::sum);
  if (!w) {
    std::fprintf(stderr, "%s\n", describe(w.error()).c_str());
    return std::nullopt;
  }
  return layout{std::move(*s), std::move(*w)};
}

// Microseconds per operation of `burst` async assigns kept 16 in flight.
double async_rate_us(const layout& l, int burst) {
  std::atomic<int> left{burst};
  std::atomic<int> started{0};
  std::mutex mtx;
  std::condition_variable cv;
  bool done = false;
  auto api = l.s.async();
  std::function<void()> issue;
  issue = [&] {
    if (started.fetch_add(1) >= burst)
      return;
    api.assign(l.w, 1.0, [&](caf::error) {
      if (left.fetch_sub(1) == 1) {
        std::lock_guard<std::mutex> guard{mtx};
        done = true;
        cv.notify_one();
        return;
      }
      issue();
    });
  };
  auto t0 = clock_type::now();
  for (int i = 0; i < 16; ++i)
    issue();
  std::unique_lock<std::mutex> guard{mtx};
  cv.wait(guard, [&] { return done; });
  return bench::micros_since(t0) / burst;
}

struct sample {
  std::vector<double> assign_us, step_us, async_us;
};

bool measure(caf::actor_system& sys, int replicas, feature f, bool on, int n,
             sample& into) {
  auto l = make(sys, replicas, f, on);
  if (!l)
    return false;
  auto assign = bench::time_calls_us(n, n / 10 + 1, [&] {
    if (auto err = l->s.assign(l->w, 1.0))
      std::fprintf(stderr, "assign: %s\n", describe(err).c_str());
  });
  auto step = bench::time_calls_us(n, n / 10 + 1, [&] {
    auto err = l->s.run([&](replica_context& ctx) {
      if (auto e = ctx.assign_add(l->w, tensor::scalar<float>(1)))
        throw std::runtime_error(describe(e));
    });
    if (err)
      std::fprintf(stderr, "step: %s\n", describe(err).c_str());
  });
  into.assign_us.push_back(assign.median);
  into.step_us.push_back(step.median);
  into.async_us.push_back(async_rate_us(*l, n * 4));
  l->s.shutdown();
  return true;
}

} // namespace

int main(int argc, char** argv) {
  auto opts = bench::parse_options(argc, argv);
  bench::recorder rec{opts.json};
  caf::actor_system_config cfg;
  bench::configure(cfg);
  caf::actor_system system{cfg};
  auto* sys = &system;
  const int n = opts.quick ? 200 : 2000;
  const int rounds = opts.quick ? 3 : 15;
  struct comparison {
    feature f;
    const char* key;
    const char* title;
  };
  for (auto cmp : {comparison{feature::metrics, "metrics", "collect_metrics"},
                   comparison{feature::flight, "flight", "flight_recorder"}}) {
  std::printf("%s overhead: %s on vs off, medians of %d alternating rounds "
              "(ratio = on / off)\n",
              cmp.key, cmp.title, rounds);
  for (int replicas : {2, 8}) {
    sample on, off;
    for (int round = 0; round < rounds; ++round) {
      const bool first_on = round % 2 == 0;
      if (!measure(*sys, replicas, cmp.f, first_on, n, first_on ? on : off)
          || !measure(*sys, replicas, cmp.f, !first_on, n,
                      first_on ? off : on))
        return 1;
    }
    struct row {
      const char* key;
      const char* text;
      std::vector<double>& a;
      std::vector<double>& b;
    };
    for (auto r : {row{"assign", "blocking cross-replica scalar assign",
                       on.assign_us, off.assign_us},
                   row{"step", "step with one scalar ON_WRITE update",
                       on.step_us, off.step_us},
                   row{"async", "async assigns, 16 in flight (per op)",
                       on.async_us, off.async_us}}) {
      auto a = bench::summarize(r.a);
      auto b = bench::summarize(r.b);
      std::printf("  %-40s %d rep: on %8.2f us  off %8.2f us  ratio %.3f\n",
                  r.text, replicas, a.median, b.median, a.median / b.median);
      auto base = std::string{cmp.key} + "." + r.key + ".r"
                  + std::to_string(replicas);
      rec.latency(base + ".on", a);
      rec.latency(base + ".off", b);
    }
  }
  if (cmp.f == feature::metrics)
    std::printf("  (a cross-replica assign takes no clock reads either way: "
                "its ratio is this machine's noise)\n");
  }
  // What reading costs: a snapshot of 1,000 variables on 4 replicas, against
  // a cross-replica read of one scalar (the cheapest request).
  {
    strategy_options options;
    options.devices = bench::host_devices(4);
    auto s = strategy::create(*sys, options);
    if (!s)
      return 1;
    std::vector<variable> vars;
    for (int i = 0; i < 1000; ++i) {
      auto v = s->create_variable("v" + std::to_string(i),
                                  tensor::scalar<float>(0),
                                  synchronization::on_write,
                                  aggregation::sum);
      if (!v)
        return 1;
      vars.push_back(*v);
    }
    auto snap = bench::time_calls_us(opts.quick ? 20 : 200, 5, [&] {
      if (!s->metrics())
        std::fprintf(stderr, "metrics failed\n");
    });
    auto read = bench::time_calls_us(opts.quick ? 200 : 2000, 20, [&] {
      if (!s->read(vars[0]))
        std::fprintf(stderr, "read failed\n");
    });
    std::printf("  %-40s 4 rep: %8.2f us  (one scalar read %.2f us, ratio "
                "%.1f)\n",
                "snapshot of 1,000 variables", snap.median, read.median,
                snap.median / read.median);
    rec.latency("metrics.snapshot.v1000.r4", snap);
    rec.latency("metrics.read_scalar.r4", read);
    s->shutdown();
  }
  return 0;
}
