// The coordinator's deadline part: entries by deadline, one pending tick.

#include "actors/coordinator/operation_deadlines.hpp"

namespace varsync {

namespace {

// Ticks closer together than this would cost more than they are worth.
constexpr auto min_tick_delay = std::chrono::milliseconds(1);

} // namespace

operation_deadlines::handle operation_deadlines::watch(caf::timespan timeout,
                                                       expirable* op) {
  return watch_until(clock::now()
                       + std::chrono::duration_cast<clock::duration>(timeout),
                     op);
}

operation_deadlines::handle
operation_deadlines::watch_until(clock::time_point deadline, expirable* op) {
  auto h = entries_.emplace(deadline, op);
  if (!tick_at_ || deadline < *tick_at_)
    schedule(deadline, clock::now());
  return h;
}

void operation_deadlines::tick() {
  const auto now = clock::now();
  if (tick_at_ && *tick_at_ > now)
    return; // an earlier tick that a nearer deadline superseded
  tick_at_.reset();
  while (!entries_.empty() && entries_.begin()->first <= now) {
    auto op = entries_.begin()->second;
    entries_.erase(entries_.begin());
    op->expire();
  }
  if (!entries_.empty())
    schedule(entries_.begin()->first, now);
}

void operation_deadlines::schedule(clock::time_point at,
                                   clock::time_point now) {
  tick_at_ = at;
  auto delay = at - now;
  if (delay < min_tick_delay)
    delay = min_tick_delay;
  schedule_(delay);
}

} // namespace varsync
