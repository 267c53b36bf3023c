// The coordinator's group commit (actors/coordinator/write_batcher.hpp).

#include "actors/coordinator/write_batcher.hpp"

#include <algorithm>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

#include "actors/spread_sends.hpp"
#include "varsync/error.hpp"

namespace varsync {

struct write_batcher::run final : expirable {
  using clock = operation_deadlines::clock;

  /// A caller waiting for its write.
  struct waiter {
    uint64_t variable = 0;
    reply_fn<ok_atom> done;
    clock::time_point deadline;
    caf::error error;
    bool answered = false;
  };

  write_batcher* owner = nullptr;
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
    owner->expire(*this);
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

write_batcher::write_batcher(self_pointer self, const replica_set& replicas,
                             read_barrier& reads,
                             operation_deadlines& deadlines)
  : self_(self), replicas_(replicas), reads_(reads), deadlines_(deadlines) {
  // nop
}

write_batcher::~write_batcher() = default;

void write_batcher::queue(component_write w, caf::timespan timeout,
                          reply_fn<ok_atom> done) {
  if (!filling_) {
    // A confirmed run is reused: no allocations per write for the run.
    if (!idle_.empty()) {
      filling_ = idle_.back();
      idle_.pop_back();
      filling_->reset();
    } else {
      runs_.push_back(std::make_unique<run>());
      filling_ = runs_.back().get();
      filling_->owner = this;
    }
  }
  auto& r = *filling_;
  auto deadline = run::clock::time_point::max();
  if (timeout != caf::timespan::max())
    deadline = run::clock::now()
               + std::chrono::duration_cast<run::clock::duration>(timeout);
  r.for_all = r.for_all || !w.first_only;
  r.waiters.push_back({w.variable, std::move(done), deadline, {}, false});
  r.writes.push_back(std::move(w));
  ++r.unanswered;
  // Deadlines mostly come in order: only an earlier one moves the watch.
  if (deadline != run::clock::time_point::max()
      && (!r.watched || deadline < r.watched_at))
    watch(r);
  if (runs_unconfirmed_ > 0 || flush_scheduled_)
    return;
  if (self_->mailbox().empty())
    return flush(); // nothing else waits: at once
  // Behind the messages already waiting, whose writes join this group.
  flush_scheduled_ = true;
  self_->send(self_, flush_writes_atom::value);
}

void write_batcher::on_flush_message() {
  flush_scheduled_ = false;
  if (runs_unconfirmed_ == 0)
    flush();
}

void write_batcher::watch(run& r) {
  auto earliest = run::clock::time_point::max();
  for (auto& w : r.waiters)
    if (!w.answered)
      earliest = std::min(earliest, w.deadline);
  if (r.watched && r.watched_at == earliest)
    return;
  if (r.watched) {
    deadlines_.unwatch(r.deadline);
    r.watched = false;
  }
  if (earliest == run::clock::time_point::max())
    return;
  r.deadline = deadlines_.watch_until(earliest, &r);
  r.watched = true;
  r.watched_at = earliest;
}

void write_batcher::flush() {
  if (!filling_)
    return;
  run* r = std::exchange(filling_, nullptr);
  r->sent = true;
  ++groups_sent_;
  writes_sent_ += r->writes.size();
  if (r->unanswered > 0)
    ++runs_unconfirmed_;
  const size_t count = r->for_all ? replicas_.size() : 1;
  r->replies_pending = count;
  if (r->writes.size() == 1)
    return send_alone(r, count);
  auto batch = std::make_shared<component_writes>();
  batch->writes = std::move(r->writes);
  r->writes.clear();
  component_writes_ptr shared = std::move(batch);
  for (size_t i = 0; i < count; ++i)
    self_->request(replicas_[i], caf::infinite, component_writes_atom::value,
                   shared)
      .then(
        [this, r, i](write_outcomes& outcomes) {
          for (size_t k = 0; k < outcomes.size() && k < r->waiters.size(); ++k)
            if (outcomes[k] && !r->waiters[k].error)
              r->waiters[k].error = std::move(outcomes[k]);
          if (--r->replies_pending == 0)
            confirm(*r);
        },
        [this, r, i](caf::error& err) {
          auto failure = replicas_.translate(err, i);
          for (auto& w : r->waiters)
            if (!w.error)
              w.error = failure;
          if (--r->replies_pending == 0)
            confirm(*r);
        });
}

void write_batcher::send_alone(run* r, size_t count) {
  // Alone: the write's own message, whose reply is a bare ok (the lone
  // caller's latency).
  auto w = std::move(r->writes.front());
  r->writes.clear();
  for (size_t i = 0; i < count; ++i) {
    auto ok = [this, r](ok_atom) {
      if (--r->replies_pending == 0)
        confirm(*r);
    };
    auto failed = [this, r, i](caf::error& err) {
      if (!r->waiters.front().error)
        r->waiters.front().error = replicas_.translate(err, i);
      if (--r->replies_pending == 0)
        confirm(*r);
    };
    if (w.split)
      self_->request(replicas_[i], caf::infinite, component_split_atom::value,
                     w.variable, w.value)
        .then(std::move(ok), std::move(failed));
    else
      self_->request(replicas_[i], caf::infinite, component_update_atom::value,
                     w.variable, w.op, w.value)
        .then(std::move(ok), std::move(failed));
  }
}

void write_batcher::answer(run& r, size_t k, caf::error err) {
  auto& w = r.waiters[k];
  w.answered = true;
  --r.unanswered;
  reads_.write_done(w.variable);
  auto done = std::move(w.done);
  if (err)
    done(std::move(err));
  else
    done(ok_atom::value);
}

void write_batcher::confirm(run& r) {
  if (r.watched) {
    deadlines_.unwatch(r.deadline);
    r.watched = false;
  }
  const bool counted = r.unanswered > 0;
  {
    // Several callers: their answers wake them on every scheduler thread,
    // at the back of the queues. Woken here, they would run one after the
    // other, each right after the coordinator, and each next write would
    // leave alone.
    std::optional<spread_sends<std::remove_pointer_t<self_pointer>>> spread;
    if (r.unanswered > 1)
      spread.emplace(self_);
    // In the writes' order; an answer may start queued operations, whose
    // writes queue behind this run until it is done.
    for (size_t k = 0; k < r.waiters.size(); ++k)
      if (!r.waiters[k].answered)
        answer(r, k, std::move(r.waiters[k].error));
  }
  if (r.unanswered == 0) // every reply is in: nothing refers to it
    idle_.push_back(&r);
  if (counted)
    confirmed();
}

void write_batcher::expire(run& r) {
  const bool counted = r.sent && r.unanswered > 0;
  auto now = run::clock::now();
  for (size_t k = 0; k < r.waiters.size(); ++k) {
    auto& w = r.waiters[k];
    if (w.answered || w.deadline > now)
      continue;
    std::string where
      = r.sent ? std::to_string(r.replies_pending) + " of "
                   + std::to_string(r.for_all ? replicas_.size() : 1)
                   + " replicas did not confirm it within the deadline"
               : "it was still queued behind earlier writes at the deadline";
    answer(r, k,
           make_error(errc::committed_late,
                      "the operation was committed and is applied to every "
                      "live component, but "
                        + where));
  }
  watch(r);
  if (counted && r.unanswered == 0)
    confirmed();
}

void write_batcher::confirmed() {
  --runs_unconfirmed_;
  if (runs_unconfirmed_ == 0)
    flush();
}

} // namespace varsync
