#include "actors/coordinator/step_driver.hpp"

#include <algorithm>

#include "varsync/error.hpp"
#include "sync/collectives/step_collectives.hpp"

namespace varsync {

caf::timespan step_driver::round::left() const {
  if (timeout == caf::timespan::max())
    return timeout;
  return timeout - std::chrono::duration_cast<caf::timespan>(
                     operation_deadlines::clock::now() - started);
}

std::shared_ptr<reply_times> step_driver::new_times() const {
  return record_.enabled() ? std::make_shared<reply_times>(replicas_.size()) : nullptr;
}

void step_driver::run(caf::timespan timeout, replica_step_ptr step,
                      reply_fn<ok_atom> done) {
  // Across processes every step is one collective round, whatever happens
  // here, so that the processes stay in step (sync/collectives/across_processes).
  auto fail = [this, &done](caf::timespan t, caf::error err) {
    owner_.agree_outcome(t, "step", std::move(err), std::move(done));
  };
  auto left = owner_.remaining(timeout, "run");
  if (!left)
    return fail(timeout, std::move(left.error()));
  timeout = *left;
  if (!step)
    return fail(timeout,
                make_error(errc::invalid_argument, "run: no step function"));
  if (auto err = owner_.check_replicas())
    return fail(timeout, std::move(err));
  const uint64_t seq = ++started_;
  if (staging_) {
    // Device replicas may keep contributions in staging buffers until the
    // step is over, whatever its outcome (host replicas never do).
    done = [this, seq, done = std::move(done)](caf::expected<ok_atom> r) {
      replicas_.tell_all(step_release_atom::value, seq);
      done(std::move(r));
    };
  }
  round r{seq, timeout, operation_deadlines::clock::now()};
  r.flight = owner_.flight_now();
  auto times = new_times();
  // User code runs in parallel on the scheduler's threads, unless the last
  // round showed it to be cheaper than waking a thread for it (a few to
  // tens of microseconds): then the replicas run in turn on this one.
  const auto how = last_round_ < spread_above ? replica_set::fan_out::local
                                               : replica_set::fan_out::spread;
  replicas_.ask_all<step_report>(
    timeout, {replica_set::on_deadline::abandoned, how, times},
    [this, r, times, done = std::move(done)](
      caf::expected<std::vector<step_report>> reports) mutable {
      if (reports)
        last_round_ = std::chrono::duration_cast<caf::timespan>(
          operation_deadlines::clock::now() - r.started);
      if (times && reports)
        record_.step_round(*times, replicas_.devices(), r.seq, r.waited);
      answered(r, std::move(reports), std::move(done));
    },
    step_atom::value, seq, step);
}

void step_driver::answered(round r,
                           caf::expected<std::vector<step_report>> reports,
                           reply_fn<ok_atom> done) {
  const auto outer = owner_.exchange_flight(r.flight);
  answered_in_flight(r, std::move(reports), std::move(done));
  owner_.exchange_flight(outer);
}

void step_driver::answered_in_flight(
  round r, caf::expected<std::vector<step_report>> reports,
  reply_fn<ok_atom> done) {
  auto fail = [this, &r, &done](caf::error err) {
    replicas_.tell_all(step_abort_atom::value, r.seq);
    owner_.agree_outcome(r.timeout, "step", std::move(err), std::move(done));
  };
  if (!reports)
    return fail(std::move(reports.error()));
  const auto left = r.left();
  bool waiting = false;
  for (auto& report : *reports)
    waiting = waiting || report.suspended;
  if (!waiting)
    return owner_.finish_step(left, *reports, r.seq, r.waited,
                              std::move(done));
  if (auto err = owner_.check_step_collectives(*reports))
    return fail(std::move(err));
  if (left <= caf::timespan::zero())
    return fail(make_error(errc::timeout,
                           "the step passed its deadline before "
                             + varsync::describe(reports->front().collective)
                             + "; it was abandoned on every replica, none "
                               "of its on_write updates was applied"));
  owner_.run_step_collective(
    left, *reports,
    [this, r, done = std::move(done)](
      caf::expected<std::vector<tensor>> result) mutable {
      if (!result) { // agreed already: the round ends the step everywhere
        replicas_.tell_all(step_abort_atom::value, r.seq);
        return done(std::move(result.error()));
      }
      resume(r, std::move(*result), std::move(done));
    });
}

void step_driver::resume(round r, std::vector<tensor> result,
                         reply_fn<ok_atom> done) {
  auto times = new_times();
  replicas_.ask_all<step_report>(
    std::max(r.left(), caf::timespan{1}),
    {replica_set::on_deadline::abandoned, replica_set::fan_out::spread, times},
    [this, r, times, done = std::move(done)](
      caf::expected<std::vector<step_report>> reports) mutable {
      if (times && reports)
        record_.step_round(*times, replicas_.devices(), r.seq, r.waited);
      answered(r, std::move(reports), std::move(done));
    },
    step_resume_atom::value, r.seq, std::move(result));
}

} // namespace varsync
