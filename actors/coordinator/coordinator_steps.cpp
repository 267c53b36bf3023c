// The coordinator: a step's replica rounds and its fused collective, all_reduce, and the requests to the
// replicas of its collective runner (actors/coordinator/collective_runner.hpp).

#include "actors/coordinator/coordinator_state.hpp"

#include <atomic>
#include <memory>
#include <string>

#include <caf/actor_system.hpp>
#include <caf/system_messages.hpp>
#include <caf/exit_reason.hpp>
#include <caf/send.hpp>

#include "core/op_checks.hpp"
#include "actors/actor_thread.hpp"
#include "actors/replica/replica_actor.hpp"
#include "varsync/error.hpp"
#include "core/logging.hpp"
#include "sync/distributed_reduce.hpp"
#include "actors/coordinator/coordinator_helpers.hpp"
#include "sync/collectives/collective_checks.hpp"
#include "sync/collectives/small_step.hpp"
#include "sync/policy/step_rules.hpp"

namespace varsync {

using namespace coordinator_helpers;

namespace {

/// V4: all_reduce value `k`, one per replica (`replicas`), of one dtype and
/// shape, reducible by `op`.
caf::error check_reduce_values(size_t k, const std::vector<tensor>& group,
                               size_t replicas, reduce_op op) {
  auto where = "all_reduce value " + std::to_string(k);
  if (group.size() != replicas)
    return make_error(errc::invalid_argument,
                      where + ": expected " + std::to_string(replicas)
                        + " per-replica values but got "
                        + std::to_string(group.size()));
  for (size_t r = 1; r < group.size(); ++r) {
    if (group[r].type() != group[0].type())
      return make_error(errc::dtype_mismatch,
                        where + ": replica " + std::to_string(r)
                          + " has dtype "
                          + std::string{to_string(group[r].type())}
                          + " but replica 0 has "
                          + std::string{to_string(group[0].type())});
    if (group[r].shape() != group[0].shape())
      return make_error(errc::shape_mismatch,
                        where + ": replica " + std::to_string(r)
                          + " has shape " + to_string(group[r].shape())
                          + " but replica 0 has "
                          + to_string(group[0].shape()));
  }
  if (op == reduce_op::mean && !is_floating(group[0].type()))
    return make_error(errc::invalid_argument,
                      where + ": mean of "
                        + std::string{to_string(group[0].type())}
                        + " values needs conversion to float64 first");
  return {};
}

} // namespace

// -- replica steps ----------------------------------------------------------------

caf::error coordinator_state::add_step_update(
  collective_plan& plan, size_t k, std::vector<step_report>& reports) {
  auto& first = reports[0].updates;
  auto e = find(first[k].variable_id);
  if (!e)
    return std::move(e.error());
  auto rule = (*e)->policy()->combine_contributions(*(*e)->info);
  auto& item = plan.add_item();
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
    plan.description += (k == 0 ? "step: '" : ", '") + item.name + "' "
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
  return {};
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
  record_.step_updates(first, seq, waited);
  // One fused collective applies every update of the step, in issue order.
  auto plan = new_plan();
  for (size_t k = 0; k < first.size(); ++k) {
    if (first[k].scatter) {
      if (auto err = add_step_scatter(*plan, k, reports))
        return fail(std::move(err));
      continue;
    }
    if (auto err = add_step_update(*plan, k, reports))
      return fail(std::move(err));
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
    fail_agreed(*this, timeout, what, std::move(err), std::move(done));
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
  for (size_t k = 0; k < values.size(); ++k)
    if (auto err = check_reduce_values(k, values[k], replicas_.size(), op))
      return fail(std::move(err));
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

// -- the collective runner's checks ---------------------------------------------

caf::error coordinator_state::unequal_vote(const std::vector<int64_t>& votes,
                                           const collective_plan& plan) {
  for (size_t r = 0; r < votes.size(); ++r) {
    auto k = votes[r];
    if (k < 0)
      continue;
    auto* e = variables_.any(plan.items[static_cast<size_t>(k)].variable_id);
    auto name = e == nullptr ? std::string{"?"} : quote_name(e->info->name);
    return unequal_contributions_error(
      name, static_cast<int>(r) + (processes ? processes->first_replica : 0));
  }
  return {};
}

} // namespace varsync
