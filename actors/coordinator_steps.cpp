// The coordinator: replica steps, all_reduce and host collectives.

#include "actors/coordinator_state.hpp"

#include <atomic>
#include <memory>
#include <string>

#include <caf/actor_system.hpp>
#include <caf/system_messages.hpp>
#include <caf/exit_reason.hpp>
#include <caf/send.hpp>

#include "actors/actor_thread.hpp"
#include "actors/replica_actor.hpp"
#include "varsync/error.hpp"
#include "core/logging.hpp"
#include "sync/distributed_reduce.hpp"
#include "actors/coordinator_gather.hpp"
#include "sync/collective_checks.hpp"
#include "sync/small_step.hpp"
#include "sync/step_rules.hpp"

namespace varsync {

using namespace coordinator_helpers;

// -- replica steps ----------------------------------------------------------------

void coordinator_state::run(caf::timespan timeout, replica_step_ptr step,
                            reply_fn<ok_atom> done) {
  // Across processes every step is one collective round, whatever happens
  // here, so that the processes stay in step (sync/collectives/across_processes).
  auto fail = [this, &done](caf::timespan t, caf::error err) {
    agree_outcome(t, "step", std::move(err), std::move(done));
  };
  auto left = remaining(timeout, "run");
  if (!left)
    return fail(timeout, std::move(left.error()));
  timeout = *left;
  if (!step)
    return fail(timeout,
                make_error(errc::invalid_argument, "run: no step function"));
  if (auto err = check_replicas())
    return fail(timeout, std::move(err));
  const uint64_t seq = ++steps_started_;
  if (uses_staging_buffers()) {
    // Device replicas may keep contributions in staging buffers until the
    // step is over, whatever its outcome (host replicas never do).
    done = [this, seq, done = std::move(done)](caf::expected<ok_atom> r) {
      for (auto& replica : replicas_)
        self_->send(replica, step_release_atom::value, seq);
      done(std::move(r));
    };
  }
  step_round round{seq, timeout, operation_deadlines::clock::now()};
  auto times = record_.enabled()
                 ? std::make_shared<reply_times>(replicas_.size())
                 : nullptr;
  // User code runs in parallel on the scheduler's threads, unless the last
  // round showed it to be cheaper than waking a thread for it (a few to
  // tens of microseconds): then the replicas run in turn on this one.
  const auto how = last_step_round_ < spread_steps_above ? fan_out::local
                                                         : fan_out::spread;
  gather<step_report>(
    replicas_.size(), timeout,
    [this, seq, step](size_t i) {
      return self_->request(replicas_[i], caf::infinite, step_atom::value, seq,
                            step);
    },
    [this, round, times, done = std::move(done)](
      caf::expected<std::vector<step_report>> reports) mutable {
      if (reports)
        last_step_round_ = std::chrono::duration_cast<caf::timespan>(
          operation_deadlines::clock::now() - round.started);
      if (times && reports)
        note_step_round(*times, round.waited, round.seq);
      step_answered(round, std::move(reports), std::move(done));
    },
    on_deadline::abandoned, how, times);
}

void coordinator_state::finish_step(caf::timespan timeout,
                                    std::vector<step_report>& reports,
                                    uint64_t seq, caf::timespan waited,
                                    reply_fn<ok_atom> done) {
  auto fail = [this, timeout, &done](caf::error err) {
    agree_outcome(timeout, "step", std::move(err), std::move(done));
  };
  auto name_of = [this](uint64_t id) { return quoted_name_of(id); };
  if (auto err = check_same_updates(reports, name_of))
    return fail(std::move(err));
  auto& first = reports[0].updates;
  if (first.empty())
    return agree_outcome(timeout, "step with no updates", {},
                         std::move(done));
  if (!ordering_->every_process_takes_part())
    return fail(make_error(
      errc::invalid_argument,
      "the step updates ON_WRITE variable " + name_of(first[0].variable_id)
        + " from replica context, which needs the replicas of every process: "
          "in services mode a step runs on this process's replicas only "
          "(use a cross-replica assign, or training mode where every "
          "process runs the step); none of the step's ON_WRITE updates was "
          "applied"));
  // V4: reports of remote replicas are checked like any message.
  for (auto& u : first)
    if (!is_valid(u.op)) {
      auto* e = variables_.any(u.variable_id);
      return fail(check_update_op(
        u.op, e == nullptr ? "#" + std::to_string(u.variable_id)
                           : e->info->name));
    }
  count_step_updates(first, seq, waited);
  // One fused collective applies every update of the step, in issue order.
  auto plan = new_plan();
  for (size_t k = 0; k < first.size(); ++k) {
    if (first[k].scatter) {
      if (auto err = add_step_scatter(*plan, k, reports))
        return fail(std::move(err));
      continue;
    }
    auto e = find(first[k].variable_id);
    if (!e)
      return fail(std::move(e.error()));
    auto rule = (*e)->policy()->combine_contributions(*(*e)->info);
    auto& item = plan->add_item();
    item.variable_id = first[k].variable_id;
    item.type = (*e)->info->type;
    item.count = element_count((*e)->info->shape);
    item.rop = rule.op;
    // An update made alike on every replica takes replica 0's value.
    item.first_only = rule.first_only || first[k].alike;
    item.require_equal = rule.require_equal && !first[k].alike;
    item.uop = first[k].op;
    item.source = collective_source::contributions;
    item.target = collective_target::components;
    item.mirrored = (*e)->policy()->mirrored();
    if (processes) {
      item.name = (*e)->info->name;
      plan->description += (k == 0 ? "step: '" : ", '") + item.name + "' "
                           + std::string{to_string(item.uop)}
                           + (first[k].alike ? " (update_mirrored)" : "");
    }
    for (auto& report : reports) {
      item.staged[item.contributions.size()] = report.updates[k].staged;
      item.contributions.push_back(std::move(report.updates[k].value));
    }
    // The collective names the variable in a V4 or W4 error it finds on
    // the device.
    if (item.name.empty() && (item.require_equal || !is_floating(item.type))
        && staged_on_device(item))
      item.name = (*e)->info->name;
  }
  // Replica-run (host, one process) collectives only for now: device
  // replicas would stage small contributions through the host to take
  // this path.
  const bool small = collective_.in_replicas != nullptr
                     && is_small_step(*plan, small_step_bytes);
  run_collective(timeout, plan, std::move(done), small);
}

void coordinator_state::all_reduce(caf::timespan timeout, reduce_op op,
                                   std::vector<std::vector<tensor>> values,
                                   reply_fn<std::vector<tensor>> done) {
  const std::string what = "all_reduce " + std::string{to_string(op)} + " of "
                           + std::to_string(values.size()) + " values";
  auto fail = [&](caf::error err) {
    fail_agreed(timeout, what, std::move(err), std::move(done));
  };
  if (!ordering_->every_process_takes_part())
    return done(make_error(
      errc::invalid_argument,
      what + ": per-replica values need every process to call all_reduce "
             "together, which services mode does not do (training mode "
             "does); nothing was done"));
  auto left = remaining(timeout, "all_reduce");
  if (!left)
    return fail(std::move(left.error()));
  timeout = *left;
  if (auto err = check_reduce_op(op, "all_reduce"))
    return fail(std::move(err));
  auto plan = new_plan(what);
  for (size_t k = 0; k < values.size(); ++k) {
    auto& group = values[k];
    auto where = "all_reduce value " + std::to_string(k);
    if (group.size() != replicas_.size())
      return fail(make_error(errc::invalid_argument,
                             where + ": expected "
                               + std::to_string(replicas_.size())
                               + " per-replica values but got "
                               + std::to_string(group.size())));
    for (size_t r = 1; r < group.size(); ++r) {
      if (group[r].type() != group[0].type())
        return fail(make_error(errc::dtype_mismatch,
                               where + ": replica " + std::to_string(r)
                                 + " has dtype "
                                 + std::string{to_string(group[r].type())}
                                 + " but replica 0 has "
                                 + std::string{to_string(group[0].type())}));
      if (group[r].shape() != group[0].shape())
        return fail(make_error(errc::shape_mismatch,
                               where + ": replica " + std::to_string(r)
                                 + " has shape " + to_string(group[r].shape())
                                 + " but replica 0 has "
                                 + to_string(group[0].shape())));
    }
    if (op == reduce_op::mean && !is_floating(group[0].type()))
      return fail(make_error(errc::invalid_argument,
                             where + ": mean of "
                               + std::string{to_string(group[0].type())}
                               + " values needs conversion to float64 first"));
  }
  // The outputs, sized by the caller's values, before any is allocated.
  uint64_t output_bytes = 0;
  for (auto& group : values)
    output_bytes = saturating_add(output_bytes, group[0].nbytes());
  if (auto err = budget_.check(output_bytes,
                               "all_reduce of " + std::to_string(values.size())
                                 + " values"))
    return fail(std::move(err));
  for (auto& group : values) {
    auto& item = plan->add_item();
    item.type = group[0].type();
    item.count = group[0].size();
    item.rop = op;
    item.source = collective_source::contributions;
    item.target = collective_target::output;
    item.contributions = std::move(group);
    item.result = tensor::empty(item.type, item.contributions[0].shape());
  }
  if (plan->items.empty() && !processes)
    return done(std::vector<tensor>{});
  if (auto err = check_replicas(); err && !processes)
    return done(std::move(err));
  run_collective(timeout, plan, [plan, done](caf::expected<ok_atom> r) {
    if (!r)
      return done(std::move(r.error()));
    std::vector<tensor> out;
    for (auto& item : plan->items)
      out.push_back(std::move(item.result));
    done(std::move(out));
  });
}

// -- host collectives -----------------------------------------------------------

void coordinator_state::run_collective(caf::timespan timeout,
                                       std::shared_ptr<collective_plan> plan,
                                       reply_fn<ok_atom> done, bool small) {
  if (collective_running_) {
    // The deadline runs while the collective waits for the one before it.
    auto since = operation_deadlines::clock::now();
    pending_collectives_.emplace_back(
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
            return finish_collective();
          }
          left = timeout - waited;
        }
        if (small)
          start_small_step(left, std::move(plan), std::move(done));
        else
          start_collective(left, std::move(plan), std::move(done));
      });
    return;
  }
  if (small)
    start_small_step(timeout, std::move(plan), std::move(done));
  else
    start_collective(timeout, std::move(plan), std::move(done));
}

void coordinator_state::start_small_step(caf::timespan timeout,
                                         std::shared_ptr<collective_plan> plan,
                                         reply_fn<ok_atom> done) {
  collective_running_ = true;
  auto finish = finishing_collective(plan, std::move(done));
  if (auto err = check_replicas())
    return finish(std::move(err));
  auto name_of = [this](uint64_t id) { return quoted_name_of(id); };
  auto ys = combine_small_step(*plan, name_of);
  if (!ys)
    return finish(std::move(ys.error()));
  // Dispatch is the commit point, as for a cross-replica update: from here
  // every live replica applies the step (or all refuse it alike).
  gather_ok(
    replicas_.size(), timeout,
    [this, ys = std::move(*ys)](size_t i) {
      return self_->request(replicas_[i], caf::infinite,
                            step_apply_atom::value, ys);
    },
    std::move(finish), on_deadline::committed);
}

void coordinator_state::start_collective(caf::timespan timeout,
                                         std::shared_ptr<collective_plan> plan,
                                         reply_fn<ok_atom> done) {
  collective_running_ = true;
  auto finish = finishing_collective(plan, std::move(done));
  auto leave_and_finish = [this, finish](caf::expected<ok_atom> r) {
    for (auto& replica : replicas_)
      self_->send(replica, collective_leave_atom::value);
    finish(std::move(r));
  };
  auto run = std::make_shared<collective_run>();
  run->plan = plan;
  run->algorithm = collective_.in_replicas;
  // The driver runs the work phase for every replica at once: the device
  // collective, or the collective across processes.
  auto drive = [this, run](reply_fn<ok_atom> then) {
    self_->request(*collective_.driver, caf::infinite,
                   collective_work_atom::value, run)
      .then([then](ok_atom) { then(ok_atom::value); },
            [this, then](caf::error& err) {
              if (err.category() == error_category)
                return then(std::move(err));
              then(make_error(errc::device_error,
                              "the " + std::string{processes ? "cross-process"
                                                             : "device"}
                                + " collective failed: "
                                + self_->system().render(err)));
            });
  };
  if (auto err = check_replicas()) {
    if (!processes)
      return finish(std::move(err));
    plan->local_error = std::move(err);
  }
  // Across processes, a round that fails here (or only agrees) still takes
  // part, without entering the replicas.
  if (processes && (plan->local_error || plan->items.empty())) {
    plan->items.clear();
    return drive(finish);
  }
  run->buffers = bind_plan_buffers(*plan);
  // Device collectives wait for their GPUs until then, and abort past it.
  run->buffers.deadline = deadline_after(timeout);
  if (collective_.driver) // the replicas publish their step-done events
    run->buffers.ready_events.assign(replicas_.size(), nullptr);
  gather<int64_t>(
    replicas_.size(), timeout,
    [this, run](size_t i) {
      return self_->request(replicas_[i], caf::infinite,
                            collective_enter_atom::value, run);
    },
    [this, plan, run, leave_and_finish, drive](
      caf::expected<std::vector<int64_t>> votes) {
      caf::error failed;
      if (!votes)
        failed = std::move(votes.error());
      else
        for (size_t r = 0; r < votes->size() && !failed; ++r) {
          auto k = (*votes)[r];
          if (k < 0)
            continue;
          auto* e
            = variables_.any(plan->items[static_cast<size_t>(k)].variable_id);
          auto name = e == nullptr ? std::string{"?"}
                                   : quote_name(e->info->name);
          failed = unequal_contributions_error(
            name, static_cast<int>(r)
                    + (processes ? processes->first_replica : 0));
        }
      if (failed) {
        if (!processes)
          return leave_and_finish(std::move(failed));
        plan->local_error = std::move(failed);
        plan->items.clear();
        run->buffers.items.clear();
        return drive(leave_and_finish);
      }
      // The work phase is memory work that cannot be interrupted halfway:
      // it runs to completion (a dead replica still fails it at once).
      if (collective_.driver)
        return drive(leave_and_finish);
      gather_ok(
        replicas_.size(), caf::timespan::max(),
        [this, run](size_t i) {
          return self_->request(replicas_[i], caf::infinite,
                                collective_work_atom::value, run);
        },
        leave_and_finish, on_deadline::abandoned,
        fan_out::spread); // the slices in parallel
    });
}

reply_fn<ok_atom>
coordinator_state::finishing_collective(std::shared_ptr<collective_plan> plan,
                                        reply_fn<ok_atom> done) {
  auto started = record_.enabled() ? reply_times::clock::now()
                                   : reply_times::clock::time_point{};
  return [this, plan = std::move(plan), started,
          done = std::move(done)](caf::expected<ok_atom> r) {
    if (r) {
      ++collectives_run_;
      count_collective(*plan, started);
    }
    done(std::move(r));
    finish_collective();
  };
}

void coordinator_state::finish_collective() {
  collective_running_ = false;
  if (!pending_collectives_.empty()) {
    auto next = std::move(pending_collectives_.front());
    pending_collectives_.pop_front();
    next();
  }
}

} // namespace varsync
