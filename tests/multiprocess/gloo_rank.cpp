// One rank of the multi-process Gloo tests (gloo_group_test.cpp starts
// several): joins the group through the rendezvous store that the test
// process publishes, runs every all-reduce case and checks the result
// against the same arithmetic done locally.
//
//   gloo_rank PORT RANK SIZE TIMEOUT_MS MODE
//
// MODE: "reduce" (every case), "absent" (the last rank never joins; the
// others must fail to join), "die" (the last rank exits right after joining;
// the others' next all_reduce must fail). Exit: 0 as expected, 1 a wrong
// result or outcome, 2 bad usage.

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/io/middleman.hpp>

#include "core/half.hpp"
#include "sync/gloo/gloo_group.hpp"
#include "varsync/config.hpp"
#include "varsync/error.hpp"
#include "varsync/dtype.hpp"

using namespace varsync;

namespace {

int failures = 0;

void check(bool ok, const std::string& what) {
  if (!ok) {
    ++failures;
    std::fprintf(stderr, "FAILED: %s\n", what.c_str());
  }
}

template <class T>
void case_of(gloo_group& g, reduce_op op, dtype type, int64_t n,
             T (*value)(int rank, int64_t i), T (*expected)(int size, int64_t i),
             const char* name) {
  std::vector<T> data(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    data[static_cast<size_t>(i)] = value(g.rank(), i);
  auto err = g.all_reduce(op, type, data.data(), n);
  check(!err, std::string{name} + ": " + describe(err));
  int64_t bad = 0;
  for (int64_t i = 0; i < n && !err; ++i) {
    T want = expected(g.size(), i);
    T got = data[static_cast<size_t>(i)];
    if (std::memcmp(&want, &got, sizeof(T)) != 0)
      ++bad;
  }
  check(bad == 0, std::string{name} + ": " + std::to_string(bad)
                    + " elements differ");
}

int run_cases(gloo_group& g) {
  const int n = g.size();
  // float32 sum of small integers: exact in any order.
  case_of<float>(
    g, reduce_op::sum, dtype::float32, (1 << 20) + 3,
    [](int r, int64_t i) { return static_cast<float>(r + 1 + i % 7); },
    [](int s, int64_t i) {
      return static_cast<float>(s * (s + 1) / 2 + s * (i % 7));
    },
    "float32 sum, 1 Mi + 3 elements");
  // float64 mean: the sum, then one division.
  case_of<double>(
    g, reduce_op::mean, dtype::float64, 1000,
    [](int r, int64_t i) { return static_cast<double>(r * 2 + i); },
    [](int s, int64_t i) {
      return static_cast<double>(s * (s - 1) + s * i) / s;
    },
    "float64 mean");
  case_of<int32_t>(
    g, reduce_op::max, dtype::int32, 17,
    [](int r, int64_t i) { return static_cast<int32_t>(r * 100 - i); },
    [](int s, int64_t i) { return static_cast<int32_t>((s - 1) * 100 - i); },
    "int32 max");
  case_of<int64_t>(
    g, reduce_op::prod, dtype::int64, 5,
    [](int r, int64_t) { return static_cast<int64_t>(r + 2); },
    [](int s, int64_t) {
      int64_t p = 1;
      for (int r = 0; r < s; ++r)
        p *= r + 2;
      return p;
    },
    "int64 prod");
  // NaN propagates through min, as in the host kernels.
  {
    std::vector<float> x(4, static_cast<float>(g.rank()));
    if (g.rank() == n - 1)
      x[0] = std::numeric_limits<float>::quiet_NaN();
    auto err = g.all_reduce(reduce_op::min, dtype::float32, x.data(), 4);
    check(!err && std::isnan(x[0]) && x[1] == 0.0f, "float32 min with a NaN");
  }
  // float16 sum, in float and rounded back.
  {
    std::vector<uint16_t> x(8, float_to_float16(0.5f));
    auto err = g.all_reduce(reduce_op::sum, dtype::float16, x.data(), 8);
    check(!err && float16_to_float(x[7]) == 0.5f * n, "float16 sum");
  }
  // V4: an int32 sum that does not fit fails on every rank, and the group
  // stays usable.
  {
    std::vector<int32_t> x{1, std::numeric_limits<int32_t>::max() - 1};
    auto err = g.all_reduce(reduce_op::sum, dtype::int32, x.data(), 2);
    check(has_code(err, errc::overflow), "int32 sum overflow: "
                                           + describe(err));
    int32_t one = 1;
    err = g.all_reduce(reduce_op::sum, dtype::int32, &one, 1);
    check(!err && one == n, "int32 sum after an overflow");
  }
  // Bad input changes nothing and reaches no peer.
  {
    int32_t x = 3;
    check(has_code(g.all_reduce(reduce_op::mean, dtype::int32, &x, 1),
                   errc::invalid_argument)
            && x == 3,
          "int32 mean is invalid_argument");
  }
  return failures == 0 ? 0 : 1;
}

} // namespace

int main(int argc, char** argv) {
  if (argc != 6) {
    std::fprintf(stderr,
                 "usage: gloo_rank PORT RANK SIZE TIMEOUT_MS MODE\n");
    return 2;
  }
  auto port = static_cast<uint16_t>(std::atoi(argv[1]));
  int rank = std::atoi(argv[2]);
  int size = std::atoi(argv[3]);
  std::chrono::milliseconds timeout{std::atoi(argv[4])};
  std::string mode = argv[5];
  if (mode == "absent" && rank == size - 1)
    return 0; // never joins
  caf::actor_system_config cfg;
  register_types(cfg);
  cfg.load<caf::io::middleman>();
  cfg.set("scheduler.max-threads", 2);
  cfg.set("logger.verbosity", caf::atom("quiet"));
  caf::actor_system sys{cfg};
  auto store = sys.middleman().remote_actor<rendezvous_store_actor>(
    "127.0.0.1", port);
  if (!store) {
    std::fprintf(stderr, "rank %d: no store: %s\n", rank,
                 sys.render(store.error()).c_str());
    return 1;
  }
  gloo_group_options opts;
  opts.rank = rank;
  opts.size = size;
  opts.timeout = timeout;
  gloo_group::block_sigpipe(); // a peer that dies must not kill this one
  auto group = gloo_group::join(sys, *store, opts);
  if (mode == "absent") {
    // The others must not join without the last rank, within the deadline.
    bool as_expected = !group && has_code(group.error(), errc::timeout);
    if (!as_expected)
      std::fprintf(stderr, "rank %d: join: %s\n", rank,
                   group ? "joined without the last rank"
                         : describe(group.error()).c_str());
    else
      std::printf("rank %d: %s\n", rank, describe(group.error()).c_str());
    return as_expected ? 0 : 1;
  }
  if (!group) {
    std::fprintf(stderr, "rank %d: join: %s\n", rank,
                 describe(group.error()).c_str());
    return 1;
  }
  if (mode == "die") {
    // One collective first: a rank's join returns once its own connections
    // are up, possibly before its peers finished theirs.
    float ready = 1;
    if (auto err = (*group)->all_reduce(reduce_op::sum, dtype::float32,
                                        &ready, 1)) {
      std::fprintf(stderr, "rank %d: first all_reduce: %s\n", rank,
                   describe(err).c_str());
      return 1;
    }
    if (rank == size - 1)
      std::_Exit(0); // gone without a word, like a killed process
    float x[256] = {};
    auto err = (*group)->all_reduce(reduce_op::sum, dtype::float32, x, 256);
    bool as_expected = has_code(err, errc::replica_failed);
    std::printf("rank %d: %s\n", rank, describe(err).c_str());
    // A failed group stays failed.
    as_expected = as_expected
                  && has_code((*group)->all_reduce(reduce_op::sum,
                                                   dtype::float32, x, 1),
                              errc::replica_failed);
    return as_expected ? 0 : 1;
  }
  return run_cases(**group);
}
