// V3 at shutdown: the last handle of a strategy may go away on any thread
// (a user's thread, an async callback on the coordinator's thread, the thread
// of save_async, a checkpoint worker) and the strategy still shuts down in
// bounded time. Each scenario runs under a watchdog: a hang fails the test
// instead of hanging it.

#include "../semantics/fixture.hpp"

#include <filesystem>
#include <future>
#include <memory>
#include <optional>
#include <thread>

#include <caf/scoped_actor.hpp>

#include "varsync/config.hpp"
#include "varsync/checkpoint.hpp"
#include "varsync/ext/checkpoint_actor.hpp"
#include "api/strategy_access.hpp"

using namespace vs_test;

namespace {

constexpr auto watchdog_limit = std::chrono::seconds(20);

// Runs `scenario` on a thread of its own and waits up to `limit` for it. A
// scenario that does not finish is left running (detached): the caller fails
// the test rather than waiting for it forever.
bool finishes_within(std::chrono::milliseconds limit,
                     std::function<void()> scenario) {
  auto finished = std::make_shared<std::promise<void>>();
  auto fut = finished->get_future();
  std::thread t{[finished, scenario = std::move(scenario)] {
    scenario();
    finished->set_value();
  }};
  if (fut.wait_for(limit) == std::future_status::ready) {
    t.join();
    return true;
  }
  t.detach();
  return false;
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path()
          / ("varsync-shutdown-" + std::to_string(::getpid()) + "-" + name))
    .string();
}

} // namespace

TEST_CASE("shutdown: the last handle released on another std::thread shuts "
          "the strategy down in bounded time") {
  auto s = std::make_shared<std::optional<strategy>>(make_strategy(2));
  auto w = make_var(**s, "w", tensor::scalar<float>(1),
                    synchronization::on_write, aggregation::sum);
  auto ok = finishes_within(watchdog_limit, [s, w] {
    std::thread t{[s, w] {
      (void) (*s)->read(w);
      s->reset(); // the last handle
    }};
    t.join();
    varsync::await_strategy_shutdowns(std::chrono::seconds(10));
  });
  s.reset();
  CHECK(ok);
  CHECK(varsync::await_strategy_shutdowns(std::chrono::seconds(10)));
}

TEST_CASE("shutdown: the last handle released inside an async callback (on "
          "the coordinator's thread) shuts the strategy down in bounded "
          "time") {
  auto s = std::make_shared<std::optional<strategy>>(make_strategy(2));
  auto w = make_var(**s, "w", tensor::scalar<float>(3),
                    synchronization::on_write, aggregation::sum);
  auto ok = finishes_within(watchdog_limit, [s, w]() mutable {
    auto released = std::make_shared<std::promise<double>>();
    auto fut = released->get_future();
    (*s)->async().read(w, [s, released](caf::expected<tensor> x) {
      s->reset(); // the last handle, on the coordinator's thread
      released->set_value(x ? x->as_double(0) : -1.0);
    });
    s.reset();
    fut.get();
    varsync::await_strategy_shutdowns(std::chrono::seconds(10));
  });
  CHECK(ok);
  CHECK(varsync::await_strategy_shutdowns(std::chrono::seconds(10)));
}

TEST_CASE("shutdown: the last handle held by save_async goes away on its "
          "thread after the callback and the strategy shuts down in bounded "
          "time") {
  auto path = temp_path("save-async.safetensors");
  auto s = std::make_shared<std::optional<strategy>>(make_strategy(2));
  make_var(**s, "w", tensor::scalar<float>(2), synchronization::on_write,
           aggregation::sum);
  auto saved = std::make_shared<std::promise<caf::error>>();
  auto fut = saved->get_future();
  auto ok = finishes_within(watchdog_limit, [s, path, saved] {
    save_async(**s, path, {}, [saved](caf::error err) {
      saved->set_value(std::move(err));
    });
    s->reset(); // the save's thread now holds the last handle
  });
  s.reset();
  CHECK(ok);
  REQUIRE(fut.wait_for(watchdog_limit) == std::future_status::ready);
  VS_REQUIRE_OK(fut.get());
  CHECK(varsync::await_strategy_shutdowns(std::chrono::seconds(10)));
  std::filesystem::remove(path);
}

TEST_CASE("shutdown: a checkpoint actor whose handle is still held does not "
          "keep the strategy's actor system from shutting down") {
  auto path = temp_path("checkpoint-actor.safetensors");
  auto s = std::make_shared<std::optional<strategy>>(make_strategy(2));
  make_var(**s, "w", tensor::scalar<float>(2), synchronization::on_write,
           aggregation::sum);
  auto cp = std::make_shared<checkpoint_actor>(spawn_checkpoint_actor(**s));
  auto ok = finishes_within(watchdog_limit, [s, path, cp] {
    {
      caf::scoped_actor self{
        varsync::detail::strategy_access::core(**s)->system()};
      self->request(*cp, std::chrono::seconds(10), checkpoint_save_atom::value,
                    path, std::vector<std::string>{})
        .receive([](ok_atom) {}, [](caf::error&) {});
    }
    s->reset(); // `cp` is still held
  });
  CHECK(ok);
  CHECK(varsync::await_strategy_shutdowns(std::chrono::seconds(10)));
  s.reset();
  cp.reset();
  std::filesystem::remove(path);
}
