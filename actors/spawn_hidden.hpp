#pragma once
// Spawns a strategy's actor hidden or not: hidden actors are not among
// those the actor system's destructor waits for first; where the system has
// a lifetime watch (messages/system_lifetime.hpp), the watch waits for them
// instead, after stopping a strategy whose handle is still held.

#include <utility>

#include <caf/actor_system.hpp>
#include <caf/spawn_options.hpp>

namespace varsync {

template <class Impl, caf::spawn_options Options = caf::no_spawn_options,
          class... Ts>
auto spawn_maybe_hidden(caf::actor_system& sys, bool hidden, Ts&&... xs) {
  if (hidden)
    return sys.spawn<Impl, Options + caf::hidden>(std::forward<Ts>(xs)...);
  return sys.spawn<Impl, Options>(std::forward<Ts>(xs)...);
}

} // namespace varsync
