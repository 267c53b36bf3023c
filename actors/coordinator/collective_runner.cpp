// The coordinator's collective runner (actors/coordinator/collective_runner.hpp).

#include "actors/coordinator/collective_runner.hpp"

#include <chrono>
#include <utility>

#include <caf/actor_system.hpp>

#include "actors/coordinator/operation_deadlines.hpp"
#include "core/bounded_wait.hpp"
#include "sync/collectives/collective_algorithm.hpp"
#include "sync/collectives/collective_buffers.hpp"
#include "sync/collectives/small_step.hpp"
#include "varsync/error.hpp"

namespace varsync {

void collective_runner::run(caf::timespan timeout,
                            std::shared_ptr<collective_plan> plan,
                            reply_fn<ok_atom> done, bool small) {
  if (!running_)
    return start(timeout, std::move(plan), std::move(done), small);
  // The deadline runs while the collective waits for the one before it.
  auto since = operation_deadlines::clock::now();
  pending_.emplace_back(
    [this, since, timeout, plan, small, done = std::move(done)]() mutable {
      auto left = timeout;
      if (timeout != caf::timespan::max()) {
        auto waited = std::chrono::duration_cast<caf::timespan>(
          operation_deadlines::clock::now() - since);
        if (waited >= timeout) {
          // Not entered: abandoned on every replica, nothing changed.
          auto late = make_error(errc::timeout,
                                 "the collective waited for earlier "
                                 "collectives past its deadline; it was "
                                 "not started, nothing was changed");
          if (plan->cross_process) { // the others still expect the round
            plan->local_error = std::move(late);
            return start_collective(timeout, std::move(plan),
                                    std::move(done));
          }
          done(std::move(late));
          return finish();
        }
        left = timeout - waited;
      }
      start(left, std::move(plan), std::move(done), small);
    });
}

void collective_runner::start(caf::timespan timeout,
                              std::shared_ptr<collective_plan> plan,
                              reply_fn<ok_atom> done, bool small) {
  if (small)
    start_small_step(timeout, std::move(plan), std::move(done));
  else
    start_collective(timeout, std::move(plan), std::move(done));
}

void collective_runner::start_small_step(caf::timespan timeout,
                                         std::shared_ptr<collective_plan> plan,
                                         reply_fn<ok_atom> done) {
  running_ = true;
  auto finish = finishing(plan, std::move(done));
  if (auto err = owner_.check_replicas())
    return finish(std::move(err));
  auto name_of = [this](uint64_t id) { return owner_.quoted_name_of(id); };
  auto ys = combine_small_step(*plan, name_of);
  if (!ys)
    return finish(std::move(ys.error()));
  // Dispatch is the commit point, as for a cross-replica update: from here
  // every live replica applies the step (or all refuse it alike).
  replicas_.ask_all<ok_atom>(timeout,
                             {replica_set::on_deadline::committed},
                             all_ok(std::move(finish)), step_apply_atom::value,
                             std::move(*ys));
}

void collective_runner::start_collective(caf::timespan timeout,
                                         std::shared_ptr<collective_plan> plan,
                                         reply_fn<ok_atom> done) {
  running_ = true;
  auto finish = finishing(plan, std::move(done));
  reply_fn<ok_atom> leave_and_finish
    = [this, finish](caf::expected<ok_atom> r) {
        replicas_.tell_all(collective_leave_atom::value);
        finish(std::move(r));
      };
  auto run = std::make_shared<collective_run>();
  run->plan = plan;
  run->algorithm = collective_.in_replicas;
  if (auto err = owner_.check_replicas()) {
    if (!plan->cross_process)
      return finish(std::move(err));
    plan->local_error = std::move(err);
  }
  // Across processes, a round that fails here (or only agrees) still takes
  // part, without entering the replicas.
  if (plan->cross_process && (plan->local_error || plan->items.empty())) {
    plan->items.clear();
    return drive(run, std::move(finish));
  }
  run->buffers = bind_plan_buffers(*plan);
  // Device collectives wait for their GPUs until then, and abort past it.
  run->buffers.deadline = deadline_after(timeout);
  if (collective_.driver) // the replicas publish their step-done events
    run->buffers.ready_events.assign(replicas_.size(), nullptr);
  replicas_.ask_all<int64_t>(
    timeout, {},
    [this, run, leave_and_finish](caf::expected<std::vector<int64_t>> votes) {
      voted(run,
            votes ? owner_.unequal_vote(*votes, *run->plan)
                  : std::move(votes.error()),
            leave_and_finish);
    },
    collective_enter_atom::value, run);
}

void collective_runner::voted(const collective_run_ptr& run,
                              caf::error failed,
                              const reply_fn<ok_atom>& leave_and_finish) {
  auto& plan = *run->plan;
  if (failed) {
    if (!plan.cross_process)
      return leave_and_finish(std::move(failed));
    plan.local_error = std::move(failed);
    plan.items.clear();
    run->buffers.items.clear();
    return drive(run, leave_and_finish);
  }
  // The work phase is memory work that cannot be interrupted halfway: it
  // runs to completion (a dead replica still fails it at once).
  if (collective_.driver)
    return drive(run, leave_and_finish);
  // The slices in parallel, with no deadline.
  replicas_.ask_all<ok_atom>(caf::timespan::max(),
                             {replica_set::on_deadline::abandoned,
                              replica_set::fan_out::spread},
                             all_ok(leave_and_finish),
                             collective_work_atom::value, run);
}

void collective_runner::drive(const collective_run_ptr& run,
                              reply_fn<ok_atom> then) {
  // The device collective, or the collective across processes.
  const bool across = run->plan->cross_process;
  self_->request(*collective_.driver, caf::infinite, collective_work_atom::value,
                 run)
    .then([then](ok_atom) { then(ok_atom::value); },
          [this, then, across](caf::error& err) {
            if (err.category() == error_category)
              return then(std::move(err));
            then(make_error(errc::device_error,
                            "the "
                              + std::string{across ? "cross-process"
                                                   : "device"}
                              + " collective failed: "
                              + self_->system().render(err)));
          });
}

reply_fn<ok_atom>
collective_runner::finishing(std::shared_ptr<collective_plan> plan,
                             reply_fn<ok_atom> done) {
  auto started = record_.enabled() ? reply_times::clock::now()
                                 : reply_times::clock::time_point{};
  return [this, plan = std::move(plan), started,
          done = std::move(done)](caf::expected<ok_atom> r) {
    if (r) {
      ++completed_;
      record_.collective_completed(*plan, started);
    }
    done(std::move(r));
    finish();
  };
}

void collective_runner::finish() {
  running_ = false;
  if (!pending_.empty()) {
    auto next = std::move(pending_.front());
    pending_.pop_front();
    next();
  }
}

} // namespace varsync
