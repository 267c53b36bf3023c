#pragma once
// Deadlines of the coordinator's in-flight operations (V3). One entry per
// operation, checked by a timer tick the coordinator sends itself, instead of
// a CAF request timeout per replica request: those register with CAF's clock
// thread (a mutex and a heap) N times per operation.

#include <chrono>
#include <map>
#include <optional>

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

  /// `op` must stay alive until it is removed or expired.
  handle add(clock::time_point deadline, expirable* op) {
    return entries_.emplace(deadline, op);
  }

  void remove(handle h) { entries_.erase(h); }

  /// Expires (and removes) every entry due at `now`.
  void expire_due(clock::time_point now) {
    while (!entries_.empty() && entries_.begin()->first <= now) {
      auto op = entries_.begin()->second;
      entries_.erase(entries_.begin());
      op->expire();
    }
  }

  std::optional<clock::time_point> next() const {
    if (entries_.empty())
      return std::nullopt;
    return entries_.begin()->first;
  }

  handle none() { return entries_.end(); }

private:
  entries entries_;
};

} // namespace varsync
