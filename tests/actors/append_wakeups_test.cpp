// The scheduling order behind actors/append_wakeups.hpp: on one CAF 0.17
// work-stealing worker, actors that a message wakes run newest first; woken
// from an appending unit, they run in the order they were woken (what lets a
// coordinator take all its replicas' replies in one resume).

#include <catch2/catch.hpp>

#include <chrono>
#include <future>
#include <memory>
#include <mutex>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/scoped_execution_unit.hpp>
#include <caf/send.hpp>

#include "actors/append_wakeups.hpp"

namespace {

// The indices of the recorders in the order they ran.
struct run_log {
  std::mutex mtx;
  std::vector<int> order;
  std::promise<std::vector<int>> all;
  size_t expected = 0;

  void ran(int index) {
    std::lock_guard<std::mutex> guard{mtx};
    order.push_back(index);
    if (order.size() == expected)
      all.set_value(order);
  }
};

// Sends one message to each of `to`, in order, when poked.
template <bool Appending>
class sender : public caf::event_based_actor {
public:
  sender(caf::actor_config& cfg, std::vector<caf::actor> to)
    : caf::event_based_actor(cfg), to_(std::move(to)) {
  }

  caf::behavior make_behavior() override {
    return {[this](int) {
      for (auto& r : to_)
        send(r, 0);
    }};
  }

  resume_result resume(caf::execution_unit* ctx, size_t max) override {
    if constexpr (Appending)
      ctx = varsync::detail::appending_unit_for(ctx);
    return caf::event_based_actor::resume(ctx, max);
  }

private:
  std::vector<caf::actor> to_;
};

// Spawns `n` idle recorders and a sender, pokes the sender from outside,
// and returns the order in which the recorders ran.
template <bool Appending>
std::vector<int> woken_order(caf::actor_system& sys, int n) {
  auto log = std::make_shared<run_log>();
  log->expected = static_cast<size_t>(n);
  auto done = log->all.get_future();
  std::vector<caf::actor> recorders;
  // The log and index travel as spawn arguments: CAF 0.17 dereferences a
  // null pointer when a function-based actor has none (tests/sanitizers/
  // ubsan.supp).
  auto recorder = [](caf::event_based_actor*, std::shared_ptr<run_log> log,
                     int i) -> caf::behavior {
    return {[log, i](int) { log->ran(i); }};
  };
  for (int i = 0; i < n; ++i)
    recorders.push_back(sys.spawn(recorder, log, i));
  auto s = sys.spawn<sender<Appending>>(recorders);
  caf::anon_send(s, 1);
  REQUIRE(done.wait_for(std::chrono::seconds(30))
          == std::future_status::ready);
  caf::anon_send_exit(s, caf::exit_reason::user_shutdown);
  for (auto& r : recorders)
    caf::anon_send_exit(r, caf::exit_reason::user_shutdown);
  return done.get();
}

} // namespace

TEST_CASE("append_wakeups: actors woken from an appending unit run in the "
          "order they were woken, and from the worker newest first") {
  caf::actor_system_config cfg;
  cfg.set("scheduler.max-threads", 1); // one worker: nothing runs elsewhere
  caf::actor_system sys{cfg};
  CHECK(woken_order<true>(sys, 4) == std::vector<int>{0, 1, 2, 3});
  CHECK(woken_order<false>(sys, 4) == std::vector<int>{3, 2, 1, 0});
}

TEST_CASE("append_wakeups: a unit that is not a work-stealing worker is "
          "kept") {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  caf::scoped_execution_unit unit{&sys};
  CHECK(varsync::detail::appending_unit_for(&unit) == &unit);
  CHECK(varsync::detail::appending_unit_for(nullptr) == nullptr);
}
