#pragma once
// Sequential requests from an event-based actor, timed one by one: the
// actor-API rows of the suite (no thread of the caller to wake).

#include <functional>
#include <future>
#include <memory>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>

#include "bench/common.hpp"

namespace bench {

// An event-based client issues `n + warmup` sequential requests produced by
// `send` and records each round trip; `send(self, done)` must call done()
// when the reply arrives.
using requester = std::function<void(caf::event_based_actor*,
                                     std::function<void()>)>;

inline stats event_based_loop(caf::actor_system& sys, int n, int warmup,
                              requester send) {
  auto result = std::make_shared<std::promise<std::vector<double>>>();
  auto fut = result->get_future();
  sys.spawn([result, n, warmup, send](caf::event_based_actor* self) {
    auto us = std::make_shared<std::vector<double>>();
    us->reserve(static_cast<size_t>(n + warmup));
    // The loop function refers to itself through a plain pointer; the actor
    // owns it until it terminates (no reference cycle, no self-destruction
    // while it runs).
    auto next = std::make_shared<std::function<void()>>();
    auto* loop = next.get();
    self->attach_functor([next](const caf::error&) {});
    auto total = static_cast<size_t>(n + warmup);
    *next = [self, us, loop, send, total, result]() {
      if (us->size() == total) {
        self->quit();
        result->set_value(*us);
        return;
      }
      auto t0 = clock_type::now();
      send(self, [us, loop, t0] {
        us->push_back(bench::micros_since(t0));
        (*loop)();
      });
    };
    (*next)();
  });
  auto us = fut.get();
  us.erase(us.begin(), us.begin() + warmup);
  return bench::summarize(std::move(us));
}

} // namespace bench
