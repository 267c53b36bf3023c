#pragma once
// Deadlines of the coordinator's in-flight operations (V3). One entry per
// operation, checked by a timer tick the coordinator sends itself, instead of
// a CAF request timeout per replica request: those register with CAF's clock
// thread (a mutex and a heap) N times per operation. The part keeps the
// entries and the time of the next tick; the actor only delivers the tick.

#include <chrono>
#include <functional>
#include <map>
#include <optional>

#include <caf/timespan.hpp>

namespace varsync {

class expirable {
public:
  virtual ~expirable() = default;
  /// The deadline passed before the operation completed.
  virtual void expire() = 0;
};

class operation_deadlines {
public:
  using clock = std::chrono::steady_clock;
  using entries = std::multimap<clock::time_point, expirable*>;
  using handle = entries::iterator;
  /// Asks for tick() after a delay (the coordinator's message to itself).
  using schedule_fn = std::function<void(clock::duration)>;

  explicit operation_deadlines(schedule_fn schedule)
    : schedule_(std::move(schedule)) {
    // nop
  }

  operation_deadlines(const operation_deadlines&) = delete;
  operation_deadlines& operator=(const operation_deadlines&) = delete;

  /// Watches `op`, which must stay alive until it is unwatched or expired.
  handle watch(caf::timespan timeout, expirable* op);
  handle watch_until(clock::time_point deadline, expirable* op);
  void unwatch(handle h) { entries_.erase(h); }

  /// The scheduled tick: expires (and removes) every entry due, and
  /// schedules the next tick.
  void tick();

  handle none() { return entries_.end(); }

private:
  void schedule(clock::time_point at, clock::time_point now);

  entries entries_;
  /// When the tick asked for last will come (none: none is pending).
  std::optional<clock::time_point> tick_at_;
  schedule_fn schedule_;
};

} // namespace varsync
