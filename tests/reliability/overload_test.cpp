// Overload is refused, not absorbed (V3): beyond max_queued_operations calls
// outstanding, a call is answered `overloaded` at once and changes nothing;
// the calls accepted are applied exactly; afterwards normal calls succeed.

#include "../semantics/fixture.hpp"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>

#include "varsync/config.hpp"
#include "varsync/ext/testing.hpp"

using namespace vs_test;

namespace {

using clock_type = std::chrono::steady_clock;

strategy make_bounded(size_t max_ops, std::vector<replica_fault> faults = {}) {
  strategy_options options;
  options.devices = test_devices(2);
  options.timeout = 20s;
  options.scheduler_threads = 2;
  options.max_queued_operations = max_ops;
  auto s = varsync::testing::create_with_faults(options, std::move(faults));
  if (!s)
    FAIL("strategy::create failed: " << describe(s.error()));
  return std::move(*s);
}

struct outcomes {
  std::mutex mtx;
  std::condition_variable cv;
  int done = 0;
  int ok = 0;
  int refused = 0;
  int other = 0;
  clock_type::duration slowest_refusal{0};

  void add(const caf::error& err, clock_type::time_point sent) {
    auto took = clock_type::now() - sent;
    std::lock_guard<std::mutex> guard{mtx};
    ++done;
    if (!err)
      ++ok;
    else if (has_code(err, errc::overloaded)) {
      ++refused;
      slowest_refusal = std::max(slowest_refusal, took);
    } else
      ++other;
    cv.notify_all();
  }

  bool wait_for(int n, std::chrono::seconds limit) {
    std::unique_lock<std::mutex> guard{mtx};
    return cv.wait_for(guard, limit, [&] { return done == n; });
  }
};

// Fires `n` async assign_adds of `x` without waiting; each outcome goes to
// `out` with the time it was sent.
template <class X>
void fire_adds(const async_strategy& api, const variable& v, const X& x, int n,
               outcomes& out) {
  for (int i = 0; i < n; ++i) {
    auto sent = clock_type::now();
    api.update(v, update_op::assign_add, x,
               [&out, sent](caf::error err) { out.add(err, sent); });
  }
}

} // namespace

TEST_CASE("V3: async calls beyond max_queued_operations are refused at once "
          "with overloaded, the accepted ones are applied exactly",
          "[reliability][overload]") {
  auto s = make_bounded(16, {delay_replica(1, 5ms)});
  // float64: an integer add over several replicas runs as a collective
  // (V4), which the replica delay does not slow; this one waits for it, so
  // the queue stays full however fast the calls are sent.
  auto v = make_var(s, "counter", tensor::scalar<double>(0),
                    synchronization::on_write, aggregation::sum);
  constexpr int n = 1000;
  outcomes out;
  auto api = s.async();
  fire_adds(api, v, 1.0, n, out);
  // While 16 are outstanding, a blocking call is refused too, at once.
  auto t0 = clock_type::now();
  auto blocked = s.assign_add(v, 1.0);
  auto blocked_took = clock_type::now() - t0;
  REQUIRE(out.wait_for(n, 60s));
  CHECK(out.other == 0);
  CHECK(out.refused >= n - 100);
  CHECK(out.ok >= 16);
  CHECK(out.slowest_refusal < 100ms);
  int blocked_ok = 0;
  if (blocked) {
    CHECK(has_code(blocked, errc::overloaded));
    CHECK(blocked_took < 100ms);
  } else {
    blocked_ok = 1; // the queue had drained by then
  }
  // Recovery: normal calls succeed, and the value counts exactly the
  // accepted updates.
  VS_REQUIRE_OK(s.assign_add(v, 1.0));
  auto value = VS_VALUE(s.read(v));
  CHECK(value.as_double() == out.ok + blocked_ok + 1);
  s.shutdown();
}

TEST_CASE("V3: calls are refused by their tensor bytes beyond "
          "max_queued_bytes",
          "[reliability][overload]") {
  strategy_options options;
  options.devices = test_devices(2);
  options.timeout = 20s;
  options.scheduler_threads = 2;
  options.max_queued_bytes = 64 * 1024; // four 16 KiB updates
  auto s = VS_VALUE(
    varsync::testing::create_with_faults(options, {delay_replica(1, 5ms)}));
  auto big = tensor::zeros(dtype::float32, {4096});
  auto v = make_var(s, "big", big, synchronization::on_write,
                    aggregation::sum);
  auto one = tensor::filled(dtype::float32, {4096}, 1.0);
  constexpr int n = 200;
  outcomes out;
  auto api = s.async();
  fire_adds(api, v, one, n, out);
  REQUIRE(out.wait_for(n, 60s));
  CHECK(out.other == 0);
  CHECK(out.refused > 0);
  CHECK(out.ok >= 4);
  auto value = VS_VALUE(s.read(v));
  CHECK(value.as_double(0) == out.ok);
  CHECK(value.as_double(4095) == out.ok);
  s.shutdown();
}

TEST_CASE("V3: overload bounds come from the actor system config",
          "[reliability][overload]") {
  caf::actor_system_config cfg;
  register_types(cfg);
  cfg.set("scheduler.max-threads", 2);
  cfg.set("logger.verbosity", caf::atom("quiet"));
  cfg.set("varsync.max-queued-operations", 4);
  caf::actor_system sys{cfg};
  strategy_options options;
  options.devices = test_devices(2);
  auto s = VS_VALUE(varsync::testing::create_with_faults(
    sys, options, {delay_replica(1, 5ms)}));
  auto v = make_var(s, "c", tensor::scalar<double>(0), // see above
                    synchronization::on_write, aggregation::sum);
  constexpr int n = 100;
  outcomes out;
  auto api = s.async();
  fire_adds(api, v, 1.0, n, out);
  REQUIRE(out.wait_for(n, 60s));
  CHECK(out.other == 0);
  CHECK(out.refused >= n - 20);
  auto value = VS_VALUE(s.read(v));
  CHECK(value.as_double() == out.ok);
  s.shutdown();
}
