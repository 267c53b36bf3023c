// Sparse updates (S1): a step that subtracts gradient rows from 1% of the
// rows of a 64 MiB ON_WRITE embedding table, against a step that updates
// the whole table densely (the same table, the same replicas). The scatter
// moves and writes only the rows named, so the ratio dense / sparse shows
// what naming rows saves. Both are medians of the blocking s.run's wall time.
//
//   sparse [--quick] [--json FILE]
//   sparse profile-sparse   (the scatter step alone, 2 replicas, for perf)

#include <algorithm>
#include <cstdio>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <caf/actor_system.hpp>

#include "bench/caf_setup.hpp"
#include "bench/common.hpp"
#include "varsync/varsync.hpp"

using namespace varsync;
using bench::clock_type;

namespace {

constexpr int64_t width = 64;                     // floats per row
constexpr int64_t rows = (64 << 20) / (width * 4); // 64 MiB of float32
constexpr int64_t touched = rows / 100;           // 1% of the rows

template <class Step>
bool time_steps(strategy& s, Step step, int reps, bench::stats& out,
                const char* what) {
  std::vector<double> secs;
  for (int i = 0; i < reps + 2; ++i) {
    auto t0 = clock_type::now();
    auto err = s.run(step);
    auto t = bench::seconds_since(t0);
    if (err) {
      std::fprintf(stderr, "%s step failed: %s\n", what,
                   describe(err).c_str());
      return false;
    }
    if (i >= 2) // warm-up: buffers and pools
      secs.push_back(t);
  }
  out = bench::summarize(secs);
  return true;
}

bool run_sparse(caf::actor_system& sys, bench::recorder& rec, bool quick,
                bool only_sparse = false) {
  for (int replicas : {2, 4}) {
    if (only_sparse && replicas != 2)
      continue;
    strategy_options options;
    options.devices = bench::host_devices(replicas);
    auto s = strategy::create(sys, options);
    if (!s) {
      std::fprintf(stderr, "%s\n", describe(s.error()).c_str());
      return false;
    }
    auto table = s->create_variable("embedding",
                                    tensor::zeros(dtype::float32, {rows, width}),
                                    synchronization::on_write,
                                    aggregation::mean);
    if (!table) {
      std::fprintf(stderr, "%s\n", describe(table.error()).c_str());
      return false;
    }
    // Per replica: its own distinct rows (as a batch's ids) and their
    // gradient rows, and a dense gradient of the whole table, built before
    // the timed region.
    std::mt19937_64 rng{42};
    std::vector<int64_t> all(static_cast<size_t>(rows));
    std::iota(all.begin(), all.end(), int64_t{0});
    std::vector<std::vector<int64_t>> ids;
    std::vector<tensor> grads, dense;
    for (int r = 0; r < replicas; ++r) {
      std::shuffle(all.begin(), all.end(), rng);
      ids.emplace_back(all.begin(), all.begin() + touched);
      grads.push_back(tensor::filled(dtype::float32, {touched, width}, 1e-3));
      dense.push_back(tensor::filled(dtype::float32, {rows, width}, 1e-3));
    }
    auto sparse_step = [&](replica_context& ctx) {
      auto r = static_cast<size_t>(ctx.replica_id());
      (void) ctx.scatter_sub(*table, ids[r], grads[r]);
    };
    auto dense_step = [&](replica_context& ctx) {
      auto r = static_cast<size_t>(ctx.replica_id());
      (void) ctx.assign_sub(*table, dense[r]);
    };
    const int reps = quick ? 5 : 15;
    bench::stats sp, de;
    if (only_sparse) {
      (void) s->run(dense_step);
      auto t0 = clock_type::now();
      for (int i = 0; i < 500; ++i)
        (void) s->run(sparse_step);
      std::printf("sparse: %.3f ms per scatter step (500 steps)\n",
                  bench::seconds_since(t0) / 500 * 1e3);
      s->shutdown();
      return true;
    }
    // Dense first: it touches every page of the table, as training has by
    // the time a scatter matters (a fresh zeroed table faults its pages in
    // one by one).
    if (!time_steps(*s, dense_step, reps, de, "dense")
        || !time_steps(*s, sparse_step, reps, sp, "scatter"))
      return false;
    std::printf("sparse %d replicas: scatter_sub of %lld rows (1%% of 64 "
                "MiB) %9.3f ms, dense assign_sub of the table %9.3f ms, "
                "ratio %6.1f\n",
                replicas, static_cast<long long>(touched), sp.median * 1e3,
                de.median * 1e3, de.median / sp.median);
    std::fflush(stdout);
    auto tag = ".r" + std::to_string(replicas);
    rec.record("sparse.scatter" + tag, sp.median, "s",
               {{"min", sp.min}, {"n", static_cast<double>(sp.n)},
                {"rows", static_cast<double>(touched)}});
    rec.record("sparse.dense" + tag, de.median, "s",
               {{"min", de.min}, {"n", static_cast<double>(de.n)}});
    s->shutdown();
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
  const bool only = !opt.rest.empty() && opt.rest[0] == "profile-sparse";
  return run_sparse(sys, rec, opt.quick, only) ? 0 : 1;
}
