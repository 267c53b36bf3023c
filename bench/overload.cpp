// Overload (V3): a strategy of 2 host replicas, async cross-replica scalar
// assign_add on an ON_WRITE float64 SUM variable, default bounds (4096 calls
// outstanding).
//
//   1. capacity: 64 calls in flight (each callback starts the next), ~2 s;
//   2. overload: ~10x the capacity offered (calls fired in batches every
//      millisecond, never waiting), ~3 s: accepted ops/s against capacity,
//      refusals and the median latency of a refusal (from the call to its
//      `overloaded` callback), resident memory (/proc/self/statm) before,
//      peak during and after;
//   3. recovery: the capacity measurement again, ~2 s.
//
// The final value of the variable must equal the number of accepted calls.
//
//   overload [--quick] [--json FILE]

#include "bench/caf_setup.hpp"
#include "bench/common.hpp"

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#include <caf/actor_system.hpp>

#include "varsync/strategy.hpp"

using namespace varsync;

namespace {

double rss_bytes() {
  long pages = 0;
  long resident = 0;
  if (FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2)
      resident = 0;
    std::fclose(f);
  }
  return static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE));
}

struct closed_loop {
  std::atomic<uint64_t> completed{0};
  std::atomic<uint64_t> failed{0};
  std::atomic<bool> stop{false};
  std::atomic<int> in_flight{0};
};

// Keeps `depth` calls in flight for `seconds`; ops/s of completed calls.
double capacity(const strategy& s, const variable& v, double seconds,
                int depth, uint64_t& applied) {
  auto loop = std::make_shared<closed_loop>();
  auto api = s.async();
  std::function<void()> start_one;
  start_one = [&, loop] {
    loop->in_flight.fetch_add(1);
    api.assign_add(v, 1.0, [&, loop](caf::error err) {
      if (err)
        loop->failed.fetch_add(1);
      else
        loop->completed.fetch_add(1);
      if (!loop->stop.load())
        start_one();
      loop->in_flight.fetch_sub(1);
    });
  };
  auto t0 = bench::clock_type::now();
  for (int i = 0; i < depth; ++i)
    start_one();
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  loop->stop.store(true);
  auto done = loop->completed.load();
  auto elapsed = bench::seconds_since(t0);
  while (loop->in_flight.load() > 0)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  applied += loop->completed.load();
  if (loop->failed.load() > 0)
    std::printf("  (%llu calls failed during a capacity run)\n",
                static_cast<unsigned long long>(loop->failed.load()));
  return static_cast<double>(done) / elapsed;
}

} // namespace

int main(int argc, char** argv) {
  auto opts = bench::parse_options(argc, argv);
  bench::recorder rec{opts.json};
  double cap_s = opts.quick ? 1.0 : 2.0;
  double over_s = opts.quick ? 1.5 : 3.0;

  caf::actor_system_config cfg;
  bench::configure(cfg);
  caf::actor_system sys{cfg};
  strategy_options so;
  so.devices = bench::host_devices(2);
  so.timeout = std::chrono::seconds(30);
  auto s = strategy::create(sys, so);
  if (!s) {
    std::fprintf(stderr, "strategy: %s\n", describe(s.error()).c_str());
    return 1;
  }
  auto v = s->create_variable("counter", tensor::scalar<double>(0),
                              synchronization::on_write, aggregation::sum);
  if (!v) {
    std::fprintf(stderr, "create: %s\n", describe(v.error()).c_str());
    return 1;
  }
  uint64_t applied = 0;
  capacity(*s, *v, 0.3, 64, applied); // warm-up
  double cap = capacity(*s, *v, cap_s, 64, applied);
  std::printf("capacity: %.0f ops/s (64 in flight, 2 host replicas)\n", cap);

  // -- overload --------------------------------------------------------------
  // Refusal latencies go to memory touched before the RSS baseline.
  std::vector<double> refusal_us(size_t{4} << 20, 0.0);
  size_t refusals_timed = 0;
  double rss_before = rss_bytes();
  std::atomic<double> rss_peak{rss_before};
  std::atomic<bool> sampling{true};
  std::thread sampler{[&] {
    while (sampling.load()) {
      double x = rss_bytes();
      if (x > rss_peak.load())
        rss_peak.store(x);
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }};
  std::atomic<uint64_t> accepted{0};
  std::atomic<uint64_t> failed{0};
  std::atomic<uint64_t> answered{0};
  uint64_t refused = 0; // refusals arrive on this thread, inside the call
  double offered_rate = 10 * cap;
  uint64_t offered = 0;
  auto api = s->async();
  auto t0 = bench::clock_type::now();
  auto t_end = t0 + std::chrono::duration_cast<bench::clock_type::duration>(
                      std::chrono::duration<double>(over_s));
  auto main_thread = std::this_thread::get_id();
  while (bench::clock_type::now() < t_end) {
    auto due = static_cast<uint64_t>(offered_rate * bench::seconds_since(t0));
    // Batches of at most 1,000: the phase ends on time even when the
    // firing thread cannot keep up with the rate (the offered rate reported
    // is what was fired).
    due = std::min(due, offered + 1000);
    while (offered < due) {
      ++offered;
      auto sent = bench::clock_type::now();
      api.assign_add(*v, 1.0, [&, sent](caf::error err) {
        if (!err)
          accepted.fetch_add(1);
        else if (has_code(err, errc::overloaded)
                 && std::this_thread::get_id() == main_thread) {
          ++refused;
          if (refusals_timed < refusal_us.size())
            refusal_us[refusals_timed++] = bench::micros_since(sent);
        } else
          failed.fetch_add(1);
        answered.fetch_add(1);
      });
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  double over_elapsed = bench::seconds_since(t0);
  // The accepted calls complete.
  while (answered.load() < offered)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  double drain_elapsed = bench::seconds_since(t0);
  sampling.store(false);
  sampler.join();
  double rss_after = rss_bytes();
  applied += accepted.load();
  double accepted_rate = static_cast<double>(accepted.load()) / drain_elapsed;
  refusal_us.resize(refusals_timed);
  auto lat = bench::summarize(refusal_us);
  std::printf("overload: offered %.0f ops/s for %.2f s (%llu calls); "
              "accepted %llu (%.0f ops/s over %.2f s incl. drain, %.2fx "
              "capacity); refused %llu, refusal median %.2f us (p99 %.2f us); "
              "other failures %llu\n",
              static_cast<double>(offered) / over_elapsed, over_elapsed,
              static_cast<unsigned long long>(offered),
              static_cast<unsigned long long>(accepted.load()), accepted_rate,
              drain_elapsed, accepted_rate / cap,
              static_cast<unsigned long long>(refused), lat.median, lat.p99,
              static_cast<unsigned long long>(failed.load()));
  std::printf("RSS: before %.1f MiB, peak during %.1f MiB, after %.1f MiB\n",
              rss_before / (1 << 20), rss_peak.load() / (1 << 20),
              rss_after / (1 << 20));

  // -- recovery ------------------------------------------------------------------
  double recovered = capacity(*s, *v, cap_s, 64, applied);
  std::printf("recovered: %.0f ops/s (%.2fx capacity)\n", recovered,
              recovered / cap);
  auto value = s->read(*v);
  bool exact = value && value->as_double() == static_cast<double>(applied);
  std::printf("final value %s the accepted calls (%llu)\n",
              exact ? "equals" : "DIFFERS FROM",
              static_cast<unsigned long long>(applied));

  rec.record("overload.capacity", cap, "ops/s");
  rec.record("overload.offered", static_cast<double>(offered) / over_elapsed,
             "ops/s");
  rec.record("overload.accepted", accepted_rate, "ops/s",
             {{"ratio", accepted_rate / cap},
              {"count", static_cast<double>(accepted.load())}});
  rec.record("overload.refused", static_cast<double>(refused), "calls",
             {{"other_failures", static_cast<double>(failed.load())}});
  rec.latency("overload.refusal_latency", lat);
  rec.record("overload.rss", rss_peak.load(), "B",
             {{"before", rss_before}, {"after", rss_after}});
  rec.record("overload.recovered", recovered, "ops/s",
             {{"ratio", recovered / cap}, {"exact", exact ? 1.0 : 0.0}});
  s->shutdown();
  return exact && failed.load() == 0 ? 0 : 1;
}
