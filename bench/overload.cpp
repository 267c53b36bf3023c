// Overload (V3): a strategy of 2 host replicas, async cross-replica
// assign_add on an ON_WRITE float64 SUM variable, default bounds (4096
// operations or 256 MiB of arguments queued). Two workloads:
//
//   bulk    256 KiB updates (the size of the report that motivated the
//           bounds: 20,000 queued updates took a process to 1.27 GB). The
//           server's work per call dominates, so one thread can offer 10x
//           the capacity even on 2 cores.
//   scalar  8-byte updates: the server's work per call is about as cheap as
//           the caller's, so on 2 cores the firing thread competes with the
//           coordinator and the replicas for CPU and cannot reach 10x.
//
// For each:
//   1. capacity: a fixed number of calls in flight (each callback starts the
//      next), ~2 s;
//   2. overload: 10x the capacity offered (calls fired in batches every
//      200 us, never waiting), ~3 s: accepted ops/s against capacity,
//      refusals and the median latency of a refusal (from the call to its
//      `overloaded` callback), resident memory (/proc/self/statm) before,
//      peak during and after;
//   3. recovery: the capacity measurement again, ~2 s.
// Every element of the variable must equal the number of accepted calls.
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
double capacity(const strategy& s, const variable& v, const tensor& x,
                double seconds, int depth, uint64_t& applied) {
  auto loop = std::make_shared<closed_loop>();
  auto api = s.async();
  std::function<void()> start_one;
  start_one = [&, loop] {
    loop->in_flight.fetch_add(1);
    api.assign_add(v, x, [&, loop](caf::error err) {
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

struct workload {
  const char* name;   // key prefix: overload.<name>.*
  int64_t elements;   // float64 elements per update
  int depth;          // calls in flight when measuring capacity
};

// Runs capacity, 10x overload and recovery on a fresh variable; false if a
// call failed with anything but `overloaded` or the final value is off.
bool run_workload(const strategy& s, const workload& w, double cap_s,
                  double over_s, bench::recorder& rec) {
  const tensor_shape shape = w.elements == 1 ? tensor_shape{}
                                             : tensor_shape{w.elements};
  auto v = s.create_variable(std::string{"counter_"} + w.name,
                             tensor::zeros(dtype::float64, shape),
                             synchronization::on_write, aggregation::sum);
  if (!v) {
    std::fprintf(stderr, "create: %s\n", describe(v.error()).c_str());
    return false;
  }
  // One immutable argument shared by every call (no copy per call).
  const tensor ones = tensor::filled(dtype::float64, shape, 1.0);
  const double bytes = static_cast<double>(ones.nbytes());
  std::printf("\n%s: %.0f-byte updates, 2 host replicas\n", w.name, bytes);
  uint64_t applied = 0;
  capacity(s, *v, ones, 0.3, w.depth, applied); // warm-up
  double cap = capacity(s, *v, ones, cap_s, w.depth, applied);
  std::printf("  capacity: %.0f ops/s (%d in flight)\n", cap, w.depth);

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
  auto api = s.async();
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
      api.assign_add(*v, ones, [&, sent](caf::error err) {
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
  double offered_ops = static_cast<double>(offered) / over_elapsed;
  double accepted_rate = static_cast<double>(accepted.load()) / drain_elapsed;
  refusal_us.resize(refusals_timed);
  auto lat = bench::summarize(refusal_us);
  std::printf("  overload: offered %.0f ops/s (%.2fx capacity) for %.2f s "
              "(%llu calls); accepted %llu (%.0f ops/s over %.2f s incl. "
              "drain, %.2fx capacity); refused %llu, refusal median %.2f us "
              "(p99 %.2f us); other failures %llu\n",
              offered_ops, offered_ops / cap, over_elapsed,
              static_cast<unsigned long long>(offered),
              static_cast<unsigned long long>(accepted.load()), accepted_rate,
              drain_elapsed, accepted_rate / cap,
              static_cast<unsigned long long>(refused), lat.median, lat.p99,
              static_cast<unsigned long long>(failed.load()));
  std::printf("  RSS: before %.1f MiB, peak during %.1f MiB, after %.1f MiB\n",
              rss_before / (1 << 20), rss_peak.load() / (1 << 20),
              rss_after / (1 << 20));

  // -- recovery ----------------------------------------------------------------
  double recovered = capacity(s, *v, ones, cap_s, w.depth, applied);
  std::printf("  recovered: %.0f ops/s (%.2fx capacity)\n", recovered,
              recovered / cap);
  auto value = s.read(*v);
  bool exact = static_cast<bool>(value);
  for (int64_t i = 0; exact && i < w.elements; ++i)
    exact = value->as_double(i) == static_cast<double>(applied);
  std::printf("  every element %s the accepted calls (%llu)\n",
              exact ? "equals" : "DIFFERS FROM",
              static_cast<unsigned long long>(applied));

  std::string k = std::string{"overload."} + w.name;
  rec.record(k + ".capacity", cap, "ops/s", {{"bytes", bytes}});
  rec.record(k + ".offered", offered_ops, "ops/s",
             {{"ratio", offered_ops / cap}});
  rec.record(k + ".accepted", accepted_rate, "ops/s",
             {{"ratio", accepted_rate / cap},
              {"count", static_cast<double>(accepted.load())}});
  rec.record(k + ".refused", static_cast<double>(refused), "calls",
             {{"other_failures", static_cast<double>(failed.load())}});
  rec.latency(k + ".refusal_latency", lat);
  rec.record(k + ".rss", rss_peak.load(), "B",
             {{"before", rss_before}, {"after", rss_after}});
  rec.record(k + ".recovered", recovered, "ops/s",
             {{"ratio", recovered / cap}, {"exact", exact ? 1.0 : 0.0}});
  return exact && failed.load() == 0;
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
  bool ok = run_workload(*s, {"bulk", 32768, 8}, cap_s, over_s, rec);
  ok = run_workload(*s, {"scalar", 1, 64}, cap_s, over_s, rec) && ok;
  s->shutdown();
  return ok ? 0 : 1;
}
