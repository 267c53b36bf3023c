// Collectives inside a step (X1): a coroutine step that all-reduces each
// replica's value and applies the sum, against what a user writes without
// them: a step that returns the per-replica values, a cross-replica
// s.all_reduce, and a second step that applies the sum. Both are medians of
// the blocking calls' wall time; the ratio is the three-call version's time
// over the coroutine step's (above 1: the coroutine step is faster).
//
//   step_collectives [--quick] [--json FILE]

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

bool run_all(caf::actor_system& sys, bench::recorder& rec, bool quick) {
  for (int replicas : {2, 4, 8}) {
    for (int64_t bytes : {int64_t{1} << 10, int64_t{1} << 20}) {
      strategy_options options;
      options.devices = bench::host_devices(replicas);
      auto s = strategy::create(sys, options);
      if (!s) {
        std::fprintf(stderr, "%s\n", describe(s.error()).c_str());
        return false;
      }
      const int64_t n = bytes / 4;
      // Each replica's value and where the step puts the sum (ON_READ:
      // a local write on each replica, so the two versions do the same
      // work besides the all-reduce).
      auto acc = s->create_variable("acc", tensor::zeros(dtype::float32, {n}),
                                    synchronization::on_read,
                                    aggregation::sum);
      if (!acc) {
        std::fprintf(stderr, "%s\n", describe(acc.error()).c_str());
        return false;
      }
      std::vector<tensor> values;
      for (int r = 0; r < replicas; ++r)
        values.push_back(tensor::filled(dtype::float32, {n}, r + 1));
      auto coroutine = [&]() -> caf::error {
        return s->run([&](replica_context& ctx) -> step_task<> {
          auto mine = values[static_cast<size_t>(ctx.replica_id())];
          auto sum = co_await ctx.all_reduce(reduce_op::sum, mine);
          (void) ctx.assign(*acc, sum);
        });
      };
      auto three_calls = [&]() -> caf::error {
        auto got = s->run([&](replica_context& ctx) {
          return values[static_cast<size_t>(ctx.replica_id())];
        });
        if (!got)
          return got.error();
        auto sum = s->all_reduce(reduce_op::sum, *got);
        if (!sum)
          return sum.error();
        auto y = sum->value();
        return s->run([&](replica_context& ctx) { (void) ctx.assign(*acc, y); });
      };
      const int reps = quick ? 20 : (bytes > 4096 ? 60 : 300);
      auto co = bench::time_ok_seconds(reps, 3, coroutine, "coroutine step");
      auto three = bench::time_ok_seconds(reps, 3, three_calls,
                                          "step + all_reduce + step");
      if (!co || !three)
        return false;
      std::printf("step_collectives %d replicas, %7lld B: coroutine step with "
                  "co_await all_reduce %9.1f us, step + s.all_reduce + step "
                  "%9.1f us, ratio %5.2f\n",
                  replicas, static_cast<long long>(bytes), co->median * 1e6,
                  three->median * 1e6, three->median / co->median);
      std::fflush(stdout);
      auto tag = ".r" + std::to_string(replicas) + "."
                 + (bytes > 4096 ? "1m" : "1k");
      rec.seconds("step_collectives.coroutine" + tag, *co);
      rec.seconds("step_collectives.three_calls" + tag, *three);
      s->shutdown();
    }
  }
  return true;
}

} // namespace

int main(int argc, char** argv) {
  auto opt = bench::parse_options(argc, argv);
  bench::recorder rec{opt.json};
  caf::actor_system_config cfg;
  bench::configure(cfg);
  caf::actor_system sys{cfg};
  return run_all(sys, rec, opt.quick) ? 0 : 1;
}
