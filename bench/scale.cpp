// Row 6, scale: the time to create 10,000 variables on 4 host replicas, and
// the memory each variable costs beyond its data.
//
//   blocking  10,000 sequential strategy::create_variable calls
//   async     10,000 async().create_variable calls issued at once, then a
//             wait until every callback has run
// for float32 scalars and for 1 KiB float32 vectors (ON_WRITE). Memory: the
// resident set size (/proc/self/statm) before and after, divided by 10,000,
// minus the data (4 components of the value); the caller keeps the 10,000
// variable handles, as a user would. Also after malloc_trim: what stays is
// live or fragmented, not free heap kept by the C library; and the heap in
// use (mallinfo2, every arena, plus the objects in varsync's slab pools),
// which fragmentation does not count. Each
// configuration runs in a fresh
// process (this program re-executes itself) so that RSS is not distorted by
// memory that an earlier configuration freed.
//
//   scale [--quick] [--json FILE] [blocking|async scalar|1k]

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <string>
#include <vector>

#include <malloc.h>

#include <caf/actor_system.hpp>

#include "bench/caf_setup.hpp"
#include "bench/common.hpp"
#include "bench/host_strategy.hpp"
#include "core/small_object_pool.hpp"
#include "varsync/ext/host_buffer_cache.hpp"
#include "varsync/varsync.hpp"

using namespace varsync;
using bench::clock_type;

namespace {

constexpr int replicas = 4;
constexpr int count = 10000;

int run_one(bench::recorder& rec, const std::string& api,
            const std::string& size) {
  caf::actor_system_config cfg;
  bench::configure(cfg);
  caf::actor_system sys{cfg};
  strategy_options options;
  options.devices = bench::host_devices(replicas);
  // The async row offers every creation at once: the queues must hold them
  // all, or some are refused with overloaded (V3) depending on how fast
  // the coordinator drains them while the caller submits.
  options.max_queued_operations = static_cast<size_t>(count) + 16;
  auto s = strategy::create(sys, options);
  if (!s) {
    std::fprintf(stderr, "%s\n", describe(s.error()).c_str());
    return 1;
  }
  auto initial = size == "1k"
                   ? tensor::zeros(dtype::float32, {256})
                   : tensor::scalar<float>(0);
  size_t data_bytes = initial.nbytes() * replicas;
  // Warm up the paths (and the allocator) with one variable.
  if (auto v = s->create_variable("warm-up", initial,
                                  synchronization::on_write, aggregation::sum))
    (void) s->destroy(*v);
  std::vector<std::string> names;
  names.reserve(count);
  for (int i = 0; i < count; ++i)
    names.push_back("var/" + std::to_string(i));
  std::vector<variable> handles(count);
  auto heap_in_use = [] {
    return mallinfo2().uordblks + small_object_pools_used_bytes();
  };
  auto heap0 = heap_in_use();
  auto rss0 = bench::resident_bytes();
  auto t0 = clock_type::now();
  int failures = 0;
  if (api == "blocking") {
    for (int i = 0; i < count; ++i) {
      auto v = s->create_variable(names[static_cast<size_t>(i)], initial,
                                  synchronization::on_write, aggregation::sum);
      if (v)
        handles[static_cast<size_t>(i)] = std::move(*v);
      else
        ++failures;
    }
  } else {
    std::atomic<int> pending{count};
    std::atomic<int> failed{0};
    std::promise<void> all_done;
    auto as = s->async();
    for (int i = 0; i < count; ++i) {
      variable_spec spec;
      spec.name = names[static_cast<size_t>(i)];
      spec.initial_value = initial;
      spec.sync = synchronization::on_write;
      spec.agg = aggregation::sum;
      as.create_variable(std::move(spec),
                         [&, i](caf::expected<variable> v) {
                           if (v)
                             handles[static_cast<size_t>(i)] = std::move(*v);
                           else
                             failed.fetch_add(1);
                           if (pending.fetch_sub(1) == 1)
                             all_done.set_value();
                         });
    }
    all_done.get_future().wait();
    failures = failed.load();
  }
  auto secs = bench::seconds_since(t0);
  auto rss1 = bench::resident_bytes();
  // What stays once the C library has returned the free heap (the async
  // burst's transient calls and messages): the variables' live memory.
  malloc_trim(0);
  auto rss2 = bench::resident_bytes();
  // The heap in use (every arena): what the variables hold whatever the
  // allocator keeps around them.
  auto heap2 = heap_in_use();
  double heap_overhead
    = (static_cast<double>(heap2) - static_cast<double>(heap0)) / count
      - static_cast<double>(data_bytes);
  double live = (static_cast<double>(rss2) - static_cast<double>(rss0)) / count
                - static_cast<double>(data_bytes);
  double per_var = (static_cast<double>(rss1) - static_cast<double>(rss0))
                   / count;
  double overhead = per_var - static_cast<double>(data_bytes);
  std::printf("create %d %s variables on %d replicas, %s API: %8.3f s "
              "(%6.1f us each); RSS +%.1f MiB = %.0f B per variable, of which "
              "%zu B data, %.0f B overhead (%.0f B after malloc_trim, "
              "%.0f B of heap in use)%s\n",
              count, size == "1k" ? "1 KiB" : "scalar", replicas, api.c_str(),
              secs, secs / count * 1e6,
              (static_cast<double>(rss1) - static_cast<double>(rss0)) / 1048576.0,
              per_var, data_bytes, overhead, live, heap_overhead,
              failures > 0 ? " (SOME CREATIONS FAILED)" : "");
  std::fflush(stdout);
  rec.record("scale.create." + api + "." + size, secs, "s",
             {{"variables", count},
              {"replicas", replicas},
              {"rss_per_variable", per_var},
              {"data_per_variable", static_cast<double>(data_bytes)},
              {"overhead_per_variable", overhead},
              {"live_overhead_per_variable", live},
              {"heap_overhead_per_variable", heap_overhead},
              {"failures", failures}});
  s->shutdown();
  return failures > 0 ? 1 : 0;
}

// The buffer cache's bound at work: see the header comment.
int run_returned(bench::recorder& rec, size_t bound_mib) {
  constexpr int64_t elements = int64_t{64} << 20; // 256 MiB of float32
  set_host_buffer_cache_limit(bound_mib << 20);
  caf::actor_system_config cfg;
  bench::configure(cfg);
  caf::actor_system sys{cfg};
  auto s = bench::host_strategy(sys, replicas);
  if (!s)
    return 1;
  malloc_trim(0);
  auto rss0 = bench::resident_bytes();
  size_t peak = 0;
  {
    auto v = s->create_variable("big", tensor::zeros(dtype::float32, {elements}),
                                synchronization::on_write, aggregation::sum);
    if (!v) {
      std::fprintf(stderr, "%s\n", describe(v.error()).c_str());
      return 1;
    }
    std::vector<tensor> grads;
    for (int r = 0; r < replicas; ++r)
      grads.push_back(tensor::filled(dtype::float32, {elements}, 1.0));
    auto err = s->run([&](replica_context& ctx) {
      (void) ctx.assign_add(*v, grads[static_cast<size_t>(ctx.replica_id())]);
    });
    auto value = s->read(*v);
    peak = bench::resident_bytes();
    if (err || !value) {
      std::fprintf(stderr, "the step or the read failed\n");
      return 1;
    }
    if (auto e = s->destroy(*v)) {
      std::fprintf(stderr, "%s\n", describe(e).c_str());
      return 1;
    }
  } // every tensor dropped here
  auto rss1 = bench::resident_bytes();
  auto cached = host_buffer_cache_bytes();
  auto mib = [](size_t b) { return static_cast<double>(b) / 1048576.0; };
  auto kept = rss1 > rss0 ? rss1 - rss0 : 0;
  std::printf("returned: cache bound %zu MiB; a 256 MiB variable on %d "
              "replicas created, stepped, read, destroyed: RSS +%.0f MiB at "
              "the peak, +%.0f MiB after (the cache holds %.0f MiB)\n",
              bound_mib, replicas, mib(peak - rss0), mib(kept), mib(cached));
  std::fflush(stdout);
  rec.record("scale.returned.b" + std::to_string(bound_mib),
             static_cast<double>(kept), "B",
             {{"bound", static_cast<double>(bound_mib << 20)},
              {"peak", static_cast<double>(peak - rss0)},
              {"cached", static_cast<double>(cached)}});
  s->shutdown();
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  auto opt = bench::parse_options(argc, argv);
  bench::recorder rec{opt.json};
  if (opt.rest.size() == 2 && opt.rest[0] == "returned")
    return run_returned(rec, std::stoul(opt.rest[1]));
  if (opt.rest.size() == 2)
    return run_one(rec, opt.rest[0], opt.rest[1]);
  // Every configuration in a fresh process.
  int status = 0;
  auto again = [&](const std::string& args) {
    auto cmd = std::string{"'"} + argv[0] + "'";
    if (!opt.json.empty())
      cmd += " --json '" + opt.json + "'";
    if (std::system((cmd + " " + args).c_str()) != 0)
      status = 1;
  };
  for (const char* api : {"blocking", "async"})
    for (const char* size : {"scalar", "1k"})
      again(std::string{api} + " " + size);
  for (const char* bound : {"1024", "256", "0"})
    again(std::string{"returned "} + bound);
  return status;
}
