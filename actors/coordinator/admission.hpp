#pragma once
// The coordinator's admission of operations (V3): at most in_flight_limit()
// run at once, the rest wait in FIFO order, bounded by count and bytes. CAF
// 0.17 keeps pending responses in a flat map searched linearly, so thousands
// of operations in flight made each reply O(n) (measured: 85% of the time of
// a burst of 10,000 async creates).

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <deque>
#include <functional>
#include <utility>

#include <caf/error.hpp>
#include <caf/timespan.hpp>

namespace varsync {

class admission {
public:
  using clock = std::chrono::steady_clock;

  admission(size_t max_queued_operations, size_t max_queued_bytes)
    : max_queued_operations_(max_queued_operations),
      max_queued_bytes_(max_queued_bytes) {
  }

  /// Set once, by the ordering of the strategy's mode.
  void set_in_flight_limit(size_t limit) { limit_ = limit; }
  size_t in_flight_limit() const { return limit_; }

  /// Runs `op` now if fewer than in_flight_limit() operations are in flight
  /// and none is waiting, else queues it. The operation must call release()
  /// once when it completes. A template so that an operation admitted at
  /// once runs without being wrapped in a std::function (an allocation per
  /// call). `bytes`: the size of its tensor arguments, counted while it
  /// waits.
  template <class F>
  void admit(F&& op, size_t bytes = 0) {
    if (in_flight_ < limit_ && waiting_.empty()) {
      ++in_flight_;
      op();
      return;
    }
    queued_bytes_ += bytes;
    waiting_.push_back(
      {clock::now(), std::function<void()>{std::forward<F>(op)}, bytes});
  }

  /// Whether an operation admitted now would wait.
  bool would_queue() const { return in_flight_ >= limit_ || !waiting_.empty(); }
  /// `overloaded` if a request of `bytes` would have to wait and the queue
  /// already holds max_queued_operations requests or the bytes would pass
  /// max_queued_bytes: refused at once, not queued.
  caf::error refuse_if_full(size_t bytes) const;

  /// An admitted operation completed: the next ones waiting start.
  void release();

  /// Runs `op`, requested at `since`, so that its deadline counts from the
  /// request: time in the mailbox or the queue is not granted twice.
  template <class F>
  void run_requested_at(clock::time_point since, F&& op) {
    auto saved = queued_for_;
    auto waited = std::chrono::duration_cast<caf::timespan>(clock::now()
                                                            - since);
    queued_for_ = std::max(saved, waited);
    op();
    queued_for_ = saved;
  }

  /// How long the operation now starting waited to be admitted.
  caf::timespan queued_for() const { return queued_for_; }
  size_t in_flight() const { return in_flight_; }
  size_t queued() const { return waiting_.size(); }
  size_t queued_bytes() const { return queued_bytes_; }
  size_t max_queued_operations() const { return max_queued_operations_; }

private:
  struct waiting_operation {
    clock::time_point since;
    std::function<void()> run;
    size_t bytes = 0;
  };

  size_t limit_ = 1;
  size_t in_flight_ = 0;
  bool draining_ = false;
  std::deque<waiting_operation> waiting_;
  size_t queued_bytes_ = 0;
  size_t max_queued_operations_;
  size_t max_queued_bytes_;
  caf::timespan queued_for_{0};
};

} // namespace varsync
