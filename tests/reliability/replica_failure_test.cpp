#include "../semantics/fixture.hpp"

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>

#include "varsync/config.hpp"
#include "varsync/ext/testing.hpp"

using namespace vs_test;

namespace {

strategy make_faulty(int replicas, std::vector<replica_fault> faults,
                     std::chrono::milliseconds timeout = 5s) {
  strategy_options options;
  options.timeout = timeout;
  return make_host_strategy(replicas, std::move(options), std::move(faults));
}

} // namespace

TEST_CASE("replica failure: operations that need a failed replica fail with "
          "replica_failed, survivors stay readable, the strategy reports it") {
  // Replica 1's operations: 1 create of w, 2 create of c, 3 the update below,
  // 4 dies.
  auto s = make_faulty(3, {fail_replica_at(1, 4, "device lost")});
  auto w = make_var(s, "w", tensor::scalar<float>(1), synchronization::on_write,
                    aggregation::sum);
  auto c = make_var(s, "c", tensor::scalar<int64_t>(0),
                    synchronization::on_read, aggregation::sum);
  VS_REQUIRE_OK(s.assign(w, 5.0));
  auto start = std::chrono::steady_clock::now();
  VS_CHECK_CODE(s.assign(w, 6.0), replica_failed);
  CHECK(std::chrono::steady_clock::now() - start < 5s);
  // Later operations fail at once, naming the replica and the reason.
  auto err = s.assign_add(c, 1.0);
  VS_CHECK_CODE(err, replica_failed);
  CHECK(message_of(err).find("replica 1") != std::string::npos);
  VS_CHECK_CODE(error_of(s.read(c)), replica_failed);
  VS_CHECK_CODE(s.run([](replica_context&) {}), replica_failed);
  auto stats = VS_VALUE(s.stats());
  REQUIRE(stats.failures.size() == 1);
  CHECK(stats.failures[0].find("replica 1 (cpu:1)") != std::string::npos);
  CHECK(stats.failures[0].find("device lost") != std::string::npos);
  // The survivors' components stay readable. The failing update reached
  // replicas 0 and 2 before replica 1 failed (W3 has no rollback across a
  // device failure); they still agree with each other.
  auto survivors = VS_VALUE(s.survivor_values(w));
  REQUIRE(survivors.size() == 3);
  CHECK_FALSE(survivors[1].has_value());
  REQUIRE(survivors[0].has_value());
  REQUIRE(survivors[2].has_value());
  CHECK(survivors[0]->bitwise_equal(*survivors[2]));
  s.shutdown(); // and the handle's destructor must not hang
}

TEST_CASE("replica failure: survivor_values counts a replica that fails as "
          "it is asked among the missing (V8), and so does the next call") {
  // Replica 2's operations: 1 create, 2 the survivors' read, where it fails.
  auto s = make_faulty(3, {fail_replica_at(2, 2)});
  auto w = make_var(s, "w", tensor::scalar<float>(4), synchronization::on_write,
                    aggregation::sum);
  for (int call = 0; call < 2; ++call) {
    auto survivors = VS_VALUE(s.survivor_values(w));
    REQUIRE(survivors.size() == 3);
    REQUIRE(survivors[0].has_value());
    REQUIRE(survivors[1].has_value());
    CHECK(survivors[0]->as_double(0) == 4);
    CHECK(survivors[1]->bitwise_equal(*survivors[0]));
    CHECK_FALSE(survivors[2].has_value());
  }
  // Operations that need every replica still fail.
  VS_CHECK_CODE(error_of(s.read(w)), replica_failed);
}

TEST_CASE("replica failure: a replica failing as it enters a step's "
          "collective fails the step and applies none of its updates") {
  // Replica 2's operations: 1 create, 2 the step, 3 the collective's enter.
  // 8 KiB of contributions: above the small-step size, a collective.
  auto s = make_faulty(3, {fail_replica_at(2, 3)});
  auto w = make_var(s, "w", tensor::zeros(dtype::float32, {2048}),
                    synchronization::on_write, aggregation::sum);
  auto ones = tensor::filled(dtype::float32, {2048}, 1.0);
  auto err = s.run(
    [&](replica_context& ctx) { VS_STEP_OK(ctx.assign_add(w, ones)); });
  VS_CHECK_CODE(err, replica_failed);
  auto survivors = VS_VALUE(s.survivor_values(w));
  CHECK(survivors[0]->as_double(0) == 0);
  CHECK(survivors[1]->as_double(0) == 0);
  CHECK_FALSE(survivors[2].has_value());
  // The survivors left the collective: they serve requests again.
  CHECK(VS_VALUE(s.survivor_values(w))[0].has_value());
}

TEST_CASE("replica failure: a small step is committed once every replica "
          "reported it: a replica failing as it applies it fails the step "
          "and the survivors hold the update") {
  // Replica 2's operations: 1 create, 2 the step, 3 applying the small
  // step's combined update (V2: past the commit point).
  auto s = make_faulty(3, {fail_replica_at(2, 3)});
  auto w = make_var(s, "w", tensor::scalar<float>(0), synchronization::on_write,
                    aggregation::sum);
  auto err = s.run(
    [&](replica_context& ctx) { VS_STEP_OK(ctx.assign_add(w, 1.0)); });
  VS_CHECK_CODE(err, replica_failed);
  auto survivors = VS_VALUE(s.survivor_values(w));
  CHECK(survivors[0]->as_double(0) == 3);
  CHECK(survivors[1]->as_double(0) == 3);
  CHECK_FALSE(survivors[2].has_value());
}

TEST_CASE("deadlines: a delayed replica makes calls answer within their "
          "deadline (timeout for reads, committed_late for writes), and the "
          "strategy recovers") {
  auto s = make_faulty(2, {delay_replica(1, 400ms, 3)});
  auto w = make_var(s, "w", tensor::scalar<float>(0), synchronization::on_write,
                    aggregation::sum);
  VS_REQUIRE_OK(s.assign(w, 1.0)); // operation 2: not delayed
  auto fast = s.with_timeout(100ms);
  auto start = std::chrono::steady_clock::now();
  // Operation 3 is delayed: the write is committed, its confirmation late.
  VS_CHECK_CODE(fast.assign(w, 2.0), committed_late);
  CHECK(std::chrono::steady_clock::now() - start < 350ms);
  // A read behind it waits for it and times out: nothing changed.
  start = std::chrono::steady_clock::now();
  VS_CHECK_CODE(error_of(fast.local_values(w)), timeout);
  CHECK(std::chrono::steady_clock::now() - start < 350ms);
  // A patient caller gets through the delay.
  VS_REQUIRE_OK(s.with_timeout(5s).assign(w, 3.0));
  CHECK(components(s, w) == std::vector<double>{3, 3});
}

TEST_CASE("deadlines: the default timeout comes from the actor system "
          "config") {
  caf::actor_system_config cfg;
  register_types(cfg);
  cfg.set("scheduler.max-threads", 2);
  cfg.set("logger.verbosity", caf::atom("quiet"));
  cfg.set("varsync.timeout-ms", 250);
  caf::actor_system sys{cfg};
  strategy_options options;
  options.devices = {"cpu:0", "cpu:1"};
  auto s = VS_VALUE(strategy::create(sys, options));
  CHECK(s.timeout() == 250ms);
  options.timeout = 1s; // an explicit timeout wins
  auto t = VS_VALUE(strategy::create(sys, options));
  CHECK(t.timeout() == 1s);
  s.shutdown();
  t.shutdown();
}
