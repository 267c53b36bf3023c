// Blocking calls from a thread that runs the strategy's actors (an async
// callback on the coordinator's thread, a replica step, an actor of the
// strategy's actor system) would wait for those very actors until the
// deadline; they fail at once with would_block and name the non-blocking way.

#include "../semantics/fixture.hpp"

#include <future>
#include <memory>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/event_based_actor.hpp>

#include "varsync/config.hpp"

using namespace vs_test;

namespace {

// Far below the strategy's deadline: the call did not wait for it.
constexpr auto fast = std::chrono::milliseconds(1000);
constexpr auto deadline = std::chrono::milliseconds(4000);

struct outcome {
  caf::error err;
  std::chrono::steady_clock::duration took{};
};

template <class F>
outcome timed(F&& call) {
  auto start = std::chrono::steady_clock::now();
  outcome out;
  out.err = call();
  out.took = std::chrono::steady_clock::now() - start;
  return out;
}

void check_fails_fast(const outcome& out, const std::string& alternative) {
  INFO("error: " << describe(out.err));
  CHECK(has_code(out.err, errc::would_block));
  CHECK(out.took < fast);
  CHECK(message_of(out.err).find(alternative) != std::string::npos);
}

} // namespace

TEST_CASE("blocking calls: a blocking read inside an async callback fails at "
          "once with would_block") {
  auto s = make_strategy(2, deadline);
  auto w = make_var(s, "w", tensor::scalar<float>(1), synchronization::on_write,
                    aggregation::sum);
  auto result = std::make_shared<std::promise<outcome>>();
  auto fut = result->get_future();
  s.async().read(w, [s, w, result](caf::expected<tensor>) {
    result->set_value(timed([&] { return error_of(s.read(w)); }));
  });
  REQUIRE(fut.wait_for(3 * deadline) == std::future_status::ready);
  check_fails_fast(fut.get(), "async()");
  // The strategy still serves calls from threads that may block.
  CHECK(read_scalar(s, w) == 1);
}

TEST_CASE("blocking calls: blocking calls inside a replica step fail at once "
          "with would_block") {
  auto s = make_strategy(2, deadline);
  auto w = make_var(s, "w", tensor::scalar<float>(1), synchronization::on_write,
                    aggregation::sum);
  // Shared with the steps: they may outlive a failing run.
  auto reads = std::make_shared<std::vector<outcome>>(2);
  auto assigns = std::make_shared<std::vector<outcome>>(2);
  VS_REQUIRE_OK(s.run([s, w, reads, assigns](replica_context& ctx) {
    auto r = static_cast<size_t>(ctx.replica_id());
    (*reads)[r] = timed([&] { return error_of(s.read(w)); });
    (*assigns)[r] = timed([&] { return s.assign(w, 2.0); });
  }));
  for (size_t r = 0; r < 2; ++r) {
    check_fails_fast((*reads)[r], "replica_context");
    check_fails_fast((*assigns)[r], "replica_context");
  }
  CHECK(read_scalar(s, w) == 1); // nothing changed
}

TEST_CASE("blocking calls: a blocking read from an actor of the strategy's "
          "actor system fails at once with would_block") {
  caf::actor_system_config cfg;
  register_types(cfg);
  cfg.set("scheduler.max-threads", 2);
  cfg.set("logger.verbosity", caf::atom("quiet"));
  caf::actor_system sys{cfg};
  {
    strategy_options options;
    options.devices = {"cpu:0", "cpu:1"};
    options.timeout = deadline;
    auto s = VS_VALUE(strategy::create(sys, options));
    auto w = make_var(s, "w", tensor::scalar<float>(1),
                      synchronization::on_write, aggregation::sum);
    auto result = std::make_shared<std::promise<outcome>>();
    auto fut = result->get_future();
    // The promise travels as a spawn argument: CAF 0.17 binds a null
    // reference for argument-less function actors (UBSan).
    sys.spawn(
      [s, w](caf::event_based_actor*,
             std::shared_ptr<std::promise<outcome>> out) {
        out->set_value(timed([&] { return error_of(s.read(w)); }));
      },
      result);
    REQUIRE(fut.wait_for(3 * deadline) == std::future_status::ready);
    check_fails_fast(fut.get(), "actor_api");
    s.shutdown();
  }
}
