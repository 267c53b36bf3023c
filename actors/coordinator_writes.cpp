// The coordinator: group commit of cross-replica writes in one process.
// A write whose checks passed is committed (V2) and queued. The queue goes
// to the replicas at once when no earlier writes wait for their
// confirmation and no other message waits in the mailbox; otherwise the
// writes that arrive meanwhile queue behind them and leave together, one
// message per replica, as soon as the earlier ones are confirmed (or after
// the waiting messages). A lone caller pays nothing extra; concurrent
// callers share the replicas' messages and replies. Any other message to
// the replicas sends the queue first, so that they see every message in
// the order the coordinator decided it (W8).

#include "actors/coordinator_state.hpp"

#include <algorithm>
#include <optional>
#include <string>
#include <utility>

#include "actors/coordinator_gather.hpp"
#include "varsync/error.hpp"

namespace varsync {

struct coordinator_state::write_run final
  : expirable, std::enable_shared_from_this<write_run> {
  using clock = operation_deadlines::clock;

  /// A caller waiting for its write.
  struct waiter {
    uint64_t variable = 0;
    reply_fn<ok_atom> done;
    clock::time_point deadline;
    caf::error error;
    bool answered = false;
  };

  coordinator_state* owner = nullptr;
  /// Moved into the message when the run is sent.
  std::vector<component_write> writes;
  std::vector<waiter> waiters;
  /// Some write is for every replica (else replica 0 alone gets the run).
  bool for_all = false;
  bool sent = false;
  size_t replies_pending = 0;
  size_t unanswered = 0;
  /// The deadline watched: the earliest of the unanswered writes'.
  bool watched = false;
  clock::time_point watched_at;
  operation_deadlines::handle deadline;

  void expire() override {
    watched = false;
    owner->expire_writes(*this);
  }

  /// Ready for the next group; the vectors keep their capacity.
  void reset() {
    writes.clear();
    waiters.clear();
    for_all = false;
    sent = false;
    replies_pending = 0;
    unanswered = 0;
    watched = false;
  }
};

void coordinator_state::queue_write(component_write w, caf::timespan timeout,
                                    reply_fn<ok_atom> done) {
  if (!filling_writes_) {
    // The last confirmed run is reused once nothing refers to it (its reply
    // handlers are gone): no allocations per write for the run itself.
    if (spare_writes_ && spare_writes_.use_count() == 1) {
      filling_writes_ = std::move(spare_writes_);
      filling_writes_->reset();
    } else {
      filling_writes_ = std::make_shared<write_run>();
      filling_writes_->owner = this;
    }
  }
  auto& run = *filling_writes_;
  auto deadline = write_run::clock::time_point::max();
  if (timeout != caf::timespan::max())
    deadline = write_run::clock::now()
               + std::chrono::duration_cast<write_run::clock::duration>(
                 timeout);
  run.for_all = run.for_all || !w.first_only;
  run.waiters.push_back({w.variable, std::move(done), deadline, {}, false});
  run.writes.push_back(std::move(w));
  ++run.unanswered;
  // Deadlines mostly come in order: only an earlier one moves the watch.
  if (deadline != write_run::clock::time_point::max()
      && (!run.watched || deadline < run.watched_at))
    watch_writes(run);
  if (write_runs_unconfirmed_ > 0 || flush_scheduled_)
    return;
  if (self_->mailbox().empty())
    return flush_writes(); // nothing else waits: at once
  // Behind the messages already waiting, whose writes join this group.
  flush_scheduled_ = true;
  self_->send(self_, flush_writes_atom::value);
}

void coordinator_state::on_flush_writes() {
  flush_scheduled_ = false;
  if (write_runs_unconfirmed_ == 0)
    flush_writes();
}

void coordinator_state::watch_writes(write_run& run) {
  auto earliest = write_run::clock::time_point::max();
  for (auto& w : run.waiters)
    if (!w.answered)
      earliest = std::min(earliest, w.deadline);
  if (run.watched && run.watched_at == earliest)
    return;
  if (run.watched) {
    unwatch(run.deadline);
    run.watched = false;
  }
  if (earliest == write_run::clock::time_point::max())
    return;
  run.deadline = watch_until(earliest, &run);
  run.watched = true;
  run.watched_at = earliest;
}

void coordinator_state::flush_writes() {
  if (!filling_writes_)
    return;
  auto run = std::move(filling_writes_);
  filling_writes_.reset();
  run->sent = true;
  ++write_groups_;
  writes_sent_ += run->writes.size();
  if (run->unanswered > 0)
    ++write_runs_unconfirmed_;
  const size_t count = run->for_all ? replicas_.size() : 1;
  run->replies_pending = count;
  if (run->writes.size() == 1) {
    // Alone: the write's own message, whose reply is a bare ok (the
    // lone caller's latency).
    auto w = std::move(run->writes.front());
    run->writes.clear();
    for (size_t i = 0; i < count; ++i) {
      auto ok = [this, run](ok_atom) {
        if (--run->replies_pending == 0)
          confirm_writes(*run);
      };
      auto failed = [this, run, i](caf::error& err) {
        if (!run->waiters.front().error)
          run->waiters.front().error = translate(err, i);
        if (--run->replies_pending == 0)
          confirm_writes(*run);
      };
      if (w.split)
        self_->request(replicas_[i], caf::infinite,
                       component_split_atom::value, w.variable, w.value)
          .then(std::move(ok), std::move(failed));
      else
        self_->request(replicas_[i], caf::infinite,
                       component_update_atom::value, w.variable, w.op,
                       w.value)
          .then(std::move(ok), std::move(failed));
    }
    return;
  }
  auto batch = std::make_shared<component_writes>();
  batch->writes = std::move(run->writes);
  run->writes.clear();
  component_writes_ptr shared = std::move(batch);
  for (size_t i = 0; i < count; ++i)
    self_->request(replicas_[i], caf::infinite, component_writes_atom::value,
                   shared)
      .then(
        [this, run, i](write_outcomes& outcomes) {
          for (size_t k = 0; k < outcomes.size() && k < run->waiters.size();
               ++k)
            if (outcomes[k] && !run->waiters[k].error)
              run->waiters[k].error = std::move(outcomes[k]);
          if (--run->replies_pending == 0)
            confirm_writes(*run);
        },
        [this, run, i](caf::error& err) {
          auto failure = translate(err, i);
          for (auto& w : run->waiters)
            if (!w.error)
              w.error = failure;
          if (--run->replies_pending == 0)
            confirm_writes(*run);
        });
}

void coordinator_state::answer_write(write_run& run, size_t k,
                                     caf::error err) {
  auto& w = run.waiters[k];
  w.answered = true;
  --run.unanswered;
  write_done(w.variable);
  auto done = std::move(w.done);
  if (err)
    done(std::move(err));
  else
    done(ok_atom::value);
}

void coordinator_state::confirm_writes(write_run& run) {
  if (run.watched) {
    unwatch(run.deadline);
    run.watched = false;
  }
  const bool counted = run.unanswered > 0;
  {
    // Several callers: their answers wake them on every scheduler thread,
    // at the back of the queues. Woken here, they would run one after the
    // other, each right after the coordinator, and each next write would
    // leave alone.
    std::optional<spread_sends<std::remove_pointer_t<self_pointer>>> spread;
    if (run.unanswered > 1)
      spread.emplace(self_);
    // In the writes' order; an answer may start queued operations, whose
    // writes queue behind this run until it is done.
    for (size_t k = 0; k < run.waiters.size(); ++k)
      if (!run.waiters[k].answered)
        answer_write(run, k, std::move(run.waiters[k].error));
  }
  if (run.unanswered == 0)
    spare_writes_ = run.shared_from_this();
  if (counted)
    writes_confirmed();
}

void coordinator_state::expire_writes(write_run& run) {
  const bool counted = run.sent && run.unanswered > 0;
  auto now = write_run::clock::now();
  for (size_t k = 0; k < run.waiters.size(); ++k) {
    auto& w = run.waiters[k];
    if (w.answered || w.deadline > now)
      continue;
    std::string where
      = run.sent ? std::to_string(run.replies_pending) + " of "
                     + std::to_string(run.for_all ? replicas_.size() : 1)
                     + " replicas did not confirm it within the deadline"
                 : "it was still queued behind earlier writes at the "
                   "deadline";
    answer_write(run, k,
                 make_error(errc::committed_late,
                            "the operation was committed and is applied to "
                            "every live component, but "
                              + where));
  }
  watch_writes(run);
  if (counted && run.unanswered == 0)
    writes_confirmed();
}

void coordinator_state::writes_confirmed() {
  --write_runs_unconfirmed_;
  if (write_runs_unconfirmed_ == 0)
    flush_writes();
}

} // namespace varsync
