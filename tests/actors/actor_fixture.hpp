#pragma once
// Shared set-up of the actor-level tests: one actor system per test case,
// configured as a user's actor-level unit test would configure it, a scoped
// actor to send requests from, and a list of actors that the fixture stops at
// the end so that the actor system's destructor does not wait forever.

#include <catch2/catch.hpp>

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include <caf/actor.hpp>
#include <caf/actor_cast.hpp>
#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/atom.hpp>
#include <caf/error.hpp>
#include <caf/exit_reason.hpp>
#include <caf/expected.hpp>
#include <caf/scoped_actor.hpp>

#include "varsync/error.hpp"
#include "varsync/tensor.hpp"
#include "varsync/config.hpp"

namespace varsync::test {

/// Generous bound for "does not hang": every request of these tests is
/// answered long before it on any machine.
constexpr auto reply_deadline = std::chrono::seconds(20);

inline caf::actor_system_config& prepare(caf::actor_system_config& cfg) {
  varsync::register_types(cfg);
  cfg.set("scheduler.max-threads", 2);
  cfg.set("logger.verbosity", caf::atom("quiet"));
  return cfg;
}

struct actor_fixture {
  caf::actor_system_config cfg;
  caf::actor_system sys;
  caf::scoped_actor self;
  std::vector<caf::actor> to_stop;

  actor_fixture() : sys{prepare(cfg)}, self{sys} {
  }

  ~actor_fixture() {
    for (auto& a : to_stop)
      self->send_exit(a, caf::exit_reason::user_shutdown);
  }

  actor_fixture(const actor_fixture&) = delete;
  actor_fixture& operator=(const actor_fixture&) = delete;

  /// Stops `handle` (and, for a coordinator, its replicas) at the end.
  template <class Handle>
  void stop_at_end(const Handle& handle) {
    to_stop.push_back(caf::actor_cast<caf::actor>(handle));
  }

  /// A blocking request from `self`; the reply, or the error (a timeout
  /// after `reply_deadline` rather than a hang).
  template <class T, class Handle, class... Ts>
  caf::expected<T> ask(const Handle& dest, Ts&&... xs) {
    caf::expected<T> result{
      make_error(errc::timeout, "the test received no reply")};
    self->request(dest, reply_deadline, std::forward<Ts>(xs)...)
      .receive([&](T& value) { result = std::move(value); },
               [&](caf::error& err) { result = std::move(err); });
    return result;
  }
};

/// Renders an unexpected error for a failing REQUIRE.
inline std::string describe_result(const caf::error& err) {
  return varsync::describe(err);
}

template <class T>
std::string describe_result(const caf::expected<T>& x) {
  return x ? std::string{"ok"} : varsync::describe(x.error());
}

} // namespace varsync::test
