// The coordinator: sparse updates. A step's scatters become plan items
// (combined row by row, S1); a cross-replica scatter is sent to the
// components its policy names (S4). The rules are in sync/scatter_update.

#include "actors/coordinator/coordinator_state.hpp"

#include <cstdio>

#include "actors/coordinator/coordinator_helpers.hpp"
#include "sync/collectives/across_processes.hpp"
#include "sync/collectives/scatter_items.hpp"
#include "sync/scatter_update.hpp"
#include "varsync/error.hpp"

namespace varsync {

using namespace coordinator_helpers;

namespace {

/// Whether applying `op` to integer rows can fail on one component and not
/// on another (components that differ: on_read, none).
bool may_overflow(scatter_op op) {
  return op == scatter_op::add || op == scatter_op::sub
         || op == scatter_op::mul || op == scatter_op::div;
}

} // namespace

bool coordinator_state::checked_on_every_component(const variable_info& info,
                                                   const sync_policy& policy,
                                                   update_target target,
                                                   scatter_op op) const {
  return target == update_target::every_component && !policy.mirrored()
         && !is_floating(info.type) && may_overflow(op)
         && total_replicas() > 1;
}

caf::error coordinator_state::add_step_scatter(collective_plan& plan, size_t k,
                                               std::vector<step_report>& reports) {
  auto& first = reports[0].updates[k];
  auto e = find(first.variable_id);
  if (!e)
    return std::move(e.error());
  auto& info = *(*e)->info;
  const auto what = std::string{to_string(first.sop)} + " of '" + info.name
                    + "' in a step";
  if (auto err = (*e)->policy()->check_scatter(info, first.sop))
    return err;
  // Each replica combined its duplicate rows; the reports are checked like
  // any message before their rows are trusted.
  std::vector<scatter_rows> parts;
  parts.reserve(reports.size());
  for (auto& report : reports) {
    auto& u = report.updates[k];
    if (auto err = validate_scatter(info, u.sop, u.indices, u.value, what))
      return err;
    if (!rows_in_kernel_form(u.sop, u.indices))
      return make_error(errc::invalid_argument,
                        what + ": a replica reported rows that are not "
                               "ascending (and distinct but for "
                               "scatter_mul / scatter_div)");
    parts.push_back({std::move(u.indices), std::move(u.value)});
  }
  auto rule = (*e)->policy()->combine_contributions(info);
  // Across processes this process combines its own replicas (a mean as a
  // sum: the division is by every replica), and the collective combines
  // the processes' rows by the rule (sync/collectives/across_processes).
  auto local = rule;
  if (processes && local.op == reduce_op::mean)
    local.op = reduce_op::sum;
  auto y = combine_scatter_contributions(info, first.sop, local, parts,
                                         quote_name(info.name));
  if (!y)
    return std::move(y.error());
  auto& item = plan.add_item();
  fill_scatter_item(item, info, first.sop, std::move(*y),
                    (*e)->policy()->mirrored(), plan.num_replicas);
  if (processes) {
    item.rop = rule.op;
    item.first_only = rule.first_only;
    item.require_equal = rule.require_equal;
    plan.description += (plan.items.size() == 1 ? "step: '" : ", '")
                        + info.name + "' " + std::string{to_string(first.sop)};
  }
  return {};
}

void coordinator_state::scatter(caf::timespan timeout, uint64_t id,
                                scatter_op op, indexed_slices slices,
                                reply_fn<ok_atom> done) {
  auto what = std::string{to_string(op)} + " of " + quoted_name_of(id);
  auto left = remaining(timeout, "scatter");
  auto e = find(id);
  // Across processes a failure here still takes part in the round that the
  // other processes run for this scatter.
  if (!left || !e) {
    auto err = !left ? std::move(left.error()) : std::move(e.error());
    return processes ? fail_agreed(*this, timeout, what, std::move(err),
                                   std::move(done))
                     : done(std::move(err));
  }
  timeout = *left;
  coordinator_record::cross_update((*e)->counts(), reads_.rerunning());
  auto& info = *(*e)->info;
  auto& policy = *(*e)->policy();
  caf::error local = validate_scatter(info, op, slices.indices, slices.values,
                                      to_string(op));
  if (!local)
    local = policy.check_scatter(info, op);
  auto target = policy.cross_replica_scatter(info, op);
  if (!local && !target)
    local = std::move(target.error());
  if (!local)
    local = check_replicas();
  caf::expected<scatter_rows> rows = caf::error{};
  if (!local) {
    rows = combine_duplicate_rows(info, op, slices.indices, slices.values);
    if (!rows)
      local = std::move(rows.error());
  }
  if (local)
    return processes ? fail_agreed(*this, timeout, what, std::move(local),
                                   std::move(done))
                     : done(std::move(local));
  if (!processes)
    return dispatch_scatter(timeout, id, op, *target, std::move(*rows),
                            std::move(done));
  // Every process makes the same scatter: the processes agree on its rows
  // first (P6: rows that differ are refused).
  char hex[24];
  std::snprintf(hex, sizeof(hex), "%016llx",
                static_cast<unsigned long long>(
                  fingerprint_of_bytes(rows->rows.data(),
                                       rows->rows.size() * sizeof(int64_t))
                  ^ fingerprint_of_bytes(rows->values.raw(),
                                         rows->values.nbytes())));
  what = std::string{to_string(op)} + " of '" + info.name + "' (rows #" + hex
         + ")";
  read_barrier::write_started(**e); // reads wait from now on (W8)
  agree(timeout, what, {},
        [this, timeout, id, op, target = *target, rows = std::move(*rows),
         done = std::move(done)](caf::expected<ok_atom> r) mutable {
          if (!r) {
            reads_.write_done(id);
            return done(std::move(r.error()));
          }
          dispatch_scatter(timeout, id, op, target, std::move(rows),
                           std::move(done));
          reads_.write_done(id); // the dispatch holds the reads now
        });
}

void coordinator_state::dispatch_scatter(caf::timespan timeout, uint64_t id,
                                         scatter_op op, update_target target,
                                         scatter_rows rows,
                                         reply_fn<ok_atom> done) {
  auto e = find(id);
  if (!e)
    return done(std::move(e.error()));
  auto& info = *(*e)->info;
  const auto what = std::string{to_string(op)} + " of '" + info.name + "'";
  // Dispatch is the commit point (V2), and reads wait for it (W8).
  read_barrier::write_started(**e);
  done = [this, id, done = std::move(done)](caf::expected<ok_atom> r) {
    reads_.write_done(id);
    done(std::move(r));
  };
  if (checked_on_every_component(info, *(*e)->policy(), target, op)) {
    // V4: components differ, so one may overflow where the others do not;
    // a collective checks every component before any is written (across
    // processes: every process's), all change or none.
    auto plan = new_plan("overflow-checked " + what);
    fill_scatter_item(plan->add_item(), info, op, std::move(rows), false,
                      plan->num_replicas);
    return run_collective(timeout, plan, std::move(done));
  }
  recorded_update u;
  u.variable_id = id;
  u.scatter = true;
  u.sop = op;
  u.indices = std::move(rows.rows);
  u.value = std::move(rows.values);
  if (target == update_target::first_component && processes) {
    // Replica 0 is in process 0: the others learn its outcome (an overflow
    // there fails the scatter everywhere).
    auto agreed = in_this_flight(
      [this, timeout, what,
       done = std::move(done)](caf::expected<ok_atom> r) mutable {
        agree(timeout, "outcome on replica 0 of " + what,
              r ? caf::error{} : std::move(r.error()), std::move(done));
      });
    if (processes->rank != 0)
      return agreed(ok_atom::value);
    done = std::move(agreed);
  }
  const bool split = target == update_target::split;
  const size_t n
    = target == update_target::first_component ? 1 : replicas_.size();
  replicas_.gather_ok(
    n, timeout,
    [this, u = std::move(u), split](size_t i) {
      return self_->request(replicas_[i], caf::infinite,
                            component_scatter_atom::value, u, split);
    },
    std::move(done), replica_set::on_deadline::committed);
}

} // namespace varsync
