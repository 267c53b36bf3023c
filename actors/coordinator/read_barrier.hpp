#pragma once
// The coordinator's read barrier (W8): a cross-replica read of a variable
// with writes dispatched and not yet confirmed by every replica waits for
// them, then runs again with the time left of its deadline. The writes in
// flight are counted in the variable's entry; the waiting reads hang off
// it while some wait.

#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include <caf/error.hpp>
#include <caf/timespan.hpp>

#include "actors/coordinator/operation_deadlines.hpp"
#include "actors/coordinator/variable_registry.hpp"
#include "messages/completion.hpp"

namespace varsync {

/// A cross-replica read waiting for the writes of its variable that were
/// dispatched before it.
struct pending_read : expirable {
  operation_deadlines::clock::time_point since;
  caf::timespan timeout;
  operation_deadlines::handle deadline;
  bool watched = false;
  bool finished = false;
  /// Runs the read again with the time that is left.
  std::function<void(caf::timespan)> rerun;
  /// Fails the read.
  std::function<void(caf::error)> fail;
  void expire() override;
};

class read_barrier {
public:
  /// `deadlines`: the coordinator's, asked only for reads that wait.
  read_barrier(variable_registry& variables, operation_deadlines& deadlines)
    : variables_(variables), deadlines_(deadlines) {
    // nop
  }

  /// Whether a read must wait for writes of `e` first.
  static bool must_wait(const variable_entry& e) {
    return e.writes_in_flight > 0;
  }
  /// A write of `e` was dispatched: its reads wait from now on.
  static void write_started(variable_entry& e) { ++e.writes_in_flight; }
  /// A write of `id` was confirmed (or failed): reads waiting for it run.
  void write_done(uint64_t id);

  /// Defers a read of `e` until its writes in flight are confirmed; `rerun`
  /// runs it again with the time left, `done` gets a timeout past it.
  template <class T>
  void wait(variable_entry& e, caf::timespan timeout,
            std::function<void(caf::timespan)> rerun, reply_fn<T> done) {
    auto w = std::make_shared<pending_read>();
    w->since = operation_deadlines::clock::now();
    w->timeout = timeout;
    w->rerun = std::move(rerun);
    w->fail = [done](caf::error err) { done(std::move(err)); };
    if (timeout != caf::timespan::max()) {
      w->deadline = deadlines_.watch(timeout, w.get());
      w->watched = true;
    }
    if (!e.waiting_reads)
      e.waiting_reads = std::make_unique<variable_entry::waiting>();
    e.waiting_reads->push_back(std::move(w));
  }

  /// The reads that waited for a variable now destroyed run again (with
  /// their whole timeout) and find it gone.
  void release(std::unique_ptr<variable_entry::waiting> reads);

  /// A read running again after the writes it waited for (not counted
  /// twice in the metrics).
  bool rerunning() const { return rerunning_; }

private:
  /// Runs (or fails) every read waiting on `e`.
  void flush(variable_entry& e);
  /// Runs `w` again with `left` of its deadline.
  void rerun(pending_read& w, caf::timespan left);

  variable_registry& variables_;
  operation_deadlines& deadlines_;
  bool rerunning_ = false;
};

} // namespace varsync
