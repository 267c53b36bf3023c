// The coordinator: sparse updates. A step's scatters become plan items
// (combined row by row, S1); a cross-replica scatter is sent to the
// components its policy names (S4). The rules are in sync/scatter_update.

#include "actors/coordinator_state.hpp"

#include "actors/coordinator_gather.hpp"
#include "sync/scatter_update.hpp"
#include "varsync/error.hpp"

namespace varsync {

using namespace coordinator_helpers;

namespace {

caf::error not_here(const std::string& what, const char* why) {
  return make_error(errc::invalid_argument,
                    what + ": scatter updates need host replicas in one "
                           "process for now ("
                      + std::string{why}
                      + "; docs/sparse-updates.md); nothing was changed");
}

/// Whether applying `op` to integer rows can fail on one component and not
/// on another (components that differ: on_read, none).
bool may_overflow(scatter_op op) {
  return op == scatter_op::add || op == scatter_op::sub
         || op == scatter_op::mul || op == scatter_op::div;
}

} // namespace

caf::error coordinator_state::add_step_scatter(collective_plan& plan, size_t k,
                                               std::vector<step_report>& reports) {
  auto& first = reports[0].updates[k];
  auto e = find(first.variable_id);
  if (!e)
    return std::move(e.error());
  auto& info = *(*e)->info;
  const auto what = std::string{to_string(first.sop)} + " of '" + info.name
                    + "' in a step";
  if (processes)
    return not_here(what, "the strategy spans processes");
  if (!collective_.in_replicas)
    return not_here(what, "the replicas are not all host replicas");
  if (auto err = (*e)->policy->check_scatter(info, first.sop))
    return err;
  // Each replica combined its duplicate rows; the reports are checked like
  // any message before their rows are trusted.
  std::vector<scatter_rows> parts;
  parts.reserve(reports.size());
  for (auto& report : reports) {
    auto& u = report.updates[k];
    if (auto err = validate_scatter(info, u.sop, u.indices, u.value, what))
      return err;
    for (size_t j = 1; j < u.indices.size(); ++j)
      if (u.indices[j] <= u.indices[j - 1])
        return make_error(errc::invalid_argument,
                          what + ": a replica reported rows that are not "
                                 "distinct and ascending");
    parts.push_back({std::move(u.indices), std::move(u.value)});
  }
  auto rule = (*e)->policy->combine_contributions(info);
  auto y = combine_scatter_contributions(info, first.sop, rule, parts,
                                         quote_name(info.name));
  if (!y)
    return std::move(y.error());
  fill_scatter_item(plan.add_item(), info, first.sop, std::move(*y),
                    (*e)->policy->mirrored(), plan.num_replicas);
  return {};
}

void coordinator_state::scatter(caf::timespan timeout, uint64_t id,
                                scatter_op op, indexed_slices slices,
                                reply_fn<ok_atom> done) {
  const auto what = std::string{to_string(op)} + " of " + quoted_name_of(id);
  if (processes) // every process refuses alike, before anything is sent
    return done(not_here(what, "the strategy spans processes"));
  auto left = remaining(timeout, "scatter");
  if (!left)
    return done(std::move(left.error()));
  timeout = *left;
  auto e = find(id);
  if (!e)
    return done(std::move(e.error()));
  auto& info = *(*e)->info;
  auto& policy = *(*e)->policy;
  if (auto err = validate_scatter(info, op, slices.indices, slices.values,
                                  to_string(op)))
    return done(std::move(err));
  if (auto err = policy.check_scatter(info, op))
    return done(std::move(err));
  auto target = policy.cross_replica_scatter(info, op);
  if (!target)
    return done(std::move(target.error()));
  if (!collective_.in_replicas)
    return done(not_here(what, "the replicas are not all host replicas"));
  if (auto err = check_replicas())
    return done(std::move(err));
  auto rows = combine_duplicate_rows(info, op, slices.indices, slices.values);
  if (!rows)
    return done(std::move(rows.error()));
  // Dispatch is the commit point (V2), and reads wait for it (W8).
  ++(*e)->writes_in_flight;
  done = [this, id, done = std::move(done)](caf::expected<ok_atom> r) {
    write_done(id);
    done(std::move(r));
  };
  if (*target == update_target::every_component && !policy.mirrored()
      && !is_floating(info.type) && may_overflow(op) && replicas_.size() > 1) {
    // V4: components differ, so one may overflow where the others do not;
    // a collective checks every component at enter: all change or none.
    auto plan = new_plan("overflow-checked " + what);
    fill_scatter_item(plan->add_item(), info, op, std::move(*rows), false,
                      plan->num_replicas);
    return run_collective(timeout, plan, std::move(done));
  }
  recorded_update u;
  u.variable_id = id;
  u.scatter = true;
  u.sop = op;
  u.indices = std::move(rows->rows);
  u.value = std::move(rows->values);
  const bool split = *target == update_target::split;
  const size_t n
    = *target == update_target::first_component ? 1 : replicas_.size();
  gather_ok(
    n, timeout,
    [this, u = std::move(u), split](size_t i) {
      return self_->request(replicas_[i], caf::infinite,
                            component_scatter_atom::value, u, split);
    },
    std::move(done), on_deadline::committed);
}

} // namespace varsync
