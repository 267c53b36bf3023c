// The coordinator: cross-replica reads, updates and per-replica values.

#include "actors/coordinator/coordinator_state.hpp"

#include <atomic>
#include <cstdio>
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
#include "sync/collectives/across_processes.hpp"
#include "sync/distributed_reduce.hpp"
#include "actors/coordinator/coordinator_helpers.hpp"

namespace varsync {

using namespace coordinator_helpers;

// -- cross-replica context ------------------------------------------------------

void coordinator_state::read(caf::timespan timeout, uint64_t id,
                             reply_fn<tensor> done) {
  auto left = remaining(timeout, "read");
  auto e = find(id);
  if (!e)
    return done(std::move(e.error()));
  coordinator_record::cross_read((*e)->counts(), reads_.rerunning());
  auto& info = *(*e)->info;
  auto plan = (*e)->policy()->cross_replica_read(info, total_replicas());
  // Across processes an aggregated read is a collective: once it is known to
  // be one, a failure here still takes part (the others expect the round).
  const bool across = processes
                      && (plan.source == read_source::reduce_components
                          || (plan.source == read_source::primary
                              && !(*e)->policy()->mirrored()));
  const std::string what = "read of '" + info.name + "'";
  if (!left)
    return across ? fail_agreed(*this, timeout, what, std::move(left.error()),
                                std::move(done))
                  : done(std::move(left.error()));
  timeout = *left;
  if (read_barrier::must_wait(**e))
    return reads_.wait<tensor>(
      **e, timeout,
      [this, id, done](caf::timespan t) {
        read(t, id, done);
      },
      done);
  if (auto err = check_replicas(); err && !across)
    return done(std::move(err)); // across: the collective reports it
  switch (plan.source) {
    case read_source::none:
      return done(std::move(plan.error));
    case read_source::primary:
      if (processes && !(*e)->policy()->mirrored())
        break; // replica 0 lives in process 0: a broadcast
      replicas_.gather<tensor>(
        1, timeout,
        [this, id](size_t) {
          return self_->request(replicas_[0], caf::infinite,
                                component_read_atom::value, id);
        },
        [done](caf::expected<std::vector<tensor>> r) {
          if (!r)
            return done(std::move(r.error()));
          done(std::move(r->front()));
        });
      return;
    case read_source::reduce_components:
      break;
  }
  if (!processes && small_enough_to_gather(info)) {
    // Small values: one round of copies and a reduction bounded by the
    // threshold beats the three phases of a collective.
    replicas_.gather<tensor>(
      replicas_.size(), timeout,
      [this, id](size_t i) {
        return self_->request(replicas_[i], caf::infinite,
                              component_read_atom::value, id);
      },
      [op = plan.op, done, name = info.name](
        caf::expected<std::vector<tensor>> r) {
        if (!r)
          return done(std::move(r.error()));
        auto value = reduce_values(op, *r);
        if (!value && has_code(value.error(), errc::overflow))
          return done(make_error(errc::overflow,
                                 "variable '" + name + "': the aggregated "
                                   "read: " + message_of(value.error())));
        done(std::move(value));
      });
    return;
  }
  read_by_collective(timeout, id, plan.op, plan.source == read_source::primary,
                     across, what, std::move(done));
}

void coordinator_state::read_by_collective(caf::timespan timeout, uint64_t id,
                                           reduce_op op, bool first_only,
                                           bool across, const std::string& what,
                                           reply_fn<tensor> done) {
  auto& info = *variables_.any(id)->info;
  if (auto err = budget_.check(
        static_cast<uint64_t>(element_count(info.shape)) * size_of(info.type),
        "read of variable " + quote_name(info.name)))
    return across ? fail_agreed(*this, timeout, what, std::move(err), std::move(done))
                  : done(std::move(err));
  auto collective = new_plan(what);
  auto& item = collective->add_item();
  item.variable_id = id;
  item.name = info.name;
  item.type = info.type;
  item.count = element_count(info.shape);
  item.rop = op;
  item.first_only = first_only;
  item.source = collective_source::components;
  item.target = collective_target::output;
  item.result = tensor::empty(info.type, info.shape);
  run_collective(timeout, collective,
                 [collective, done, name = info.name](caf::expected<ok_atom> r) {
                   if (!r) {
                     if (has_code(r.error(), errc::overflow))
                       return done(make_error(
                         errc::overflow, "variable '" + name
                                           + "': the aggregated read: "
                                           + message_of(r.error())));
                     return done(std::move(r.error()));
                   }
                   done(std::move(collective->items[0].result));
                 });
}

void coordinator_state::update(caf::timespan timeout, uint64_t id,
                               update_op op, tensor value,
                               reply_fn<ok_atom> done) {
  auto left = remaining(timeout, "update");
  auto e = find(id);
  // Across processes a failure here still takes part in the round that the
  // other processes run for this update.
  if (!left || !e) {
    auto err = !left ? std::move(left.error()) : std::move(e.error());
    return processes
             ? fail_agreed(*this, timeout,
                           std::string{to_string(op)} + " of "
                             + quoted_name_of(id),
                           std::move(err), std::move(done))
             : done(std::move(err));
  }
  timeout = *left;
  coordinator_record::cross_update((*e)->counts(), reads_.rerunning());
  auto& info = *(*e)->info;
  if (processes) {
    // Every process makes the same update with the same value: the
    // processes agree on it first (a value that differs is refused).
    auto what = std::string{to_string(op)} + " of '" + info.name + "'";
    caf::error local = update_checks(info, op, value);
    if (local)
      return fail_agreed(*this, timeout, what, std::move(local), std::move(done));
    char hex[24];
    std::snprintf(hex, sizeof(hex), "%016llx",
                  static_cast<unsigned long long>(
                    fingerprint_of_bytes(value.raw(), value.nbytes())));
    what += std::string{" (value #"} + hex + ")";
    read_barrier::write_started(**e); // reads wait from now on (W8)
    return agree(timeout, what, {},
                 in_this_flight([this, timeout, id, op,
                                 value = std::move(value),
                                 done = std::move(done)](
                                  caf::expected<ok_atom> r) mutable {
                   if (!r) {
                     reads_.write_done(id);
                     return done(std::move(r.error()));
                   }
                   dispatch_update(timeout, id, op, std::move(value),
                                   std::move(done));
                   reads_.write_done(id); // the dispatch holds the reads now
                 }));
  }
  if (auto err = update_checks(info, op, value))
    return done(std::move(err));
  dispatch_update(timeout, id, op, std::move(value), std::move(done));
}

caf::error coordinator_state::update_checks(const variable_info& info,
                                            update_op op,
                                            const tensor& value) const {
  // V4: an op outside the enum would throw in every replica's kernel.
  if (auto err = check_update_op(op, info.name))
    return err;
  if (auto err = validate_value(info, value, to_string(op)))
    return err;
  return check_replicas();
}

bool coordinator_state::checked_update(const variable_info& info,
                                       update_target target,
                                       update_op op) const {
  return target == update_target::every_component && !is_floating(info.type)
         && op != update_op::assign && total_replicas() > 1;
}

bool coordinator_state::joins_group_commit(uint64_t id, update_op op) {
  auto e = find(id);
  if (!e || !is_valid(op))
    return false;
  auto& info = *(*e)->info;
  const auto target = (*e)->policy()->cross_replica_update(info, op);
  // Replica 0's outcome and the overflow check are rounds of their own.
  return target != update_target::first_component
         && !checked_update(info, target, op);
}

void coordinator_state::dispatch_update(caf::timespan timeout, uint64_t id,
                                        update_op op, tensor value,
                                        reply_fn<ok_atom> done) {
  auto e = find(id);
  if (!e)
    return done(std::move(e.error()));
  auto& info = *(*e)->info;
  // Dispatch is the commit point (V2): from here the update reaches every
  // live component, and reads of the variable wait for its confirmation (W8).
  read_barrier::write_started(**e);
  const auto target = (*e)->policy()->cross_replica_update(info, op);
  // In one process the write joins the group commit, unless it needs the
  // collective's overflow check below.
  const bool checked_collective = checked_update(info, target, op);
  if (!processes && !checked_collective) {
    // Built with its value (a default tensor would allocate its shape).
    return writes_.queue(component_write{id, op,
                                         target == update_target::split,
                                         target
                                           == update_target::first_component,
                                         std::move(value)},
                         timeout, std::move(done));
  }
  done = [this, id, done = std::move(done)](caf::expected<ok_atom> r) {
    reads_.write_done(id);
    done(std::move(r));
  };
  switch (target) {
    case update_target::every_component:
      if (checked_collective)
        return update_checked(timeout, info, op, std::move(value),
                              std::move(done));
      return replicas_.gather_ok(
        replicas_.size(), timeout,
        [this, id, op, value](size_t i) {
          return self_->request(replicas_[i], caf::infinite,
                                component_update_atom::value, id, op, value);
        },
        std::move(done), replica_set::on_deadline::committed);
    case update_target::first_component:
      if (processes) {
        // Replica 0 is in process 0: the others learn its outcome (an
        // overflow there fails the update everywhere).
        auto agreed = in_this_flight(
          [this, timeout, op, name = info.name,
           done = std::move(done)](caf::expected<ok_atom> r) mutable {
            agree(timeout,
                  "outcome on replica 0 of " + std::string{to_string(op)}
                    + " of '" + name + "'",
                  r ? caf::error{} : std::move(r.error()), std::move(done));
          });
        if (processes->rank != 0)
          return agreed(ok_atom::value);
        done = std::move(agreed);
      }
      return replicas_.gather_ok(
         1, timeout,
        [this, id, op, value](size_t) {
          return self_->request(replicas_[0], caf::infinite,
                                component_update_atom::value, id, op, value);
        },
        std::move(done), replica_set::on_deadline::committed);
    case update_target::split:
      return replicas_.gather_ok(
        replicas_.size(), timeout,
        [this, id, value](size_t i) {
          return self_->request(replicas_[i], caf::infinite,
                                component_split_atom::value, id, value);
        },
        std::move(done), replica_set::on_deadline::committed);
  }
}

void coordinator_state::update_checked(caf::timespan timeout,
                                       const variable_info& info, update_op op,
                                       tensor value, reply_fn<ok_atom> done) {
  // V4: components may differ (on_read, none), so one may overflow where
  // the others do not. A collective checks every component at enter, before
  // any is written: all change or none.
  auto plan = new_plan("overflow-checked " + std::string{to_string(op)}
                       + " of '" + info.name + "'");
  auto& item = plan->add_item();
  item.variable_id = info.id;
  item.name = info.name;
  item.type = info.type;
  item.count = element_count(info.shape);
  item.rop = reduce_op::sum;
  item.first_only = true;
  item.uop = op;
  item.source = collective_source::contributions;
  item.target = collective_target::components;
  item.mirrored = policy_for(info.sync).mirrored();
  item.contributions.assign(replicas_.size(), std::move(value));
  run_collective(timeout, plan, std::move(done));
}

void coordinator_state::local_values(caf::timespan timeout, uint64_t id,
                                     reply_fn<std::vector<tensor>> done) {
  auto left = remaining(timeout, "local_values");
  if (!left)
    return done(std::move(left.error()));
  timeout = *left;
  auto e = find(id);
  if (!e)
    return done(std::move(e.error()));
  coordinator_record::cross_read((*e)->counts(), reads_.rerunning());
  if (read_barrier::must_wait(**e))
    return reads_.wait<std::vector<tensor>>(
      **e, timeout,
      [this, id, done](caf::timespan t) {
        local_values(t, id, done);
      },
      done);
  if (auto err = check_replicas())
    return done(std::move(err));
  // One host copy of every component.
  auto& info = *(*e)->info;
  if (auto err = budget_.check(
        saturating_mul(static_cast<uint64_t>(element_count(info.shape))
                         * size_of(info.type),
                       replicas_.size()),
        "local_values of variable " + quote_name(info.name)))
    return done(std::move(err));
  replicas_.gather<tensor>(
    replicas_.size(), timeout,
    [this, id](size_t i) {
      return self_->request(replicas_[i], caf::infinite, component_read_atom::value,
                            id);
    },
    std::move(done));
}

void coordinator_state::all_values(caf::timespan timeout, uint64_t id,
                                   reply_fn<std::vector<tensor>> done) {
  if (!processes)
    return local_values(timeout, id, std::move(done));
  auto e = find(id);
  if (!e)
    return fail_agreed(*this, timeout, "values of #" + std::to_string(id),
                       std::move(e.error()), std::move(done));
  coordinator_record::cross_read((*e)->counts(), reads_.rerunning());
  auto& info = *(*e)->info;
  const auto bytes = static_cast<uint64_t>(element_count(info.shape))
                     * size_of(info.type);
  auto plan = new_plan("values of every replica of '" + info.name + "'");
  if (auto err = budget_.check(
        saturating_mul(bytes, static_cast<uint64_t>(total_replicas()) * 2),
        "values of every replica of " + quote_name(info.name)))
    return fail_agreed(*this, timeout, plan->description, std::move(err),
                       std::move(done));
  auto& item = plan->add_item();
  item.variable_id = id;
  item.name = info.name;
  item.type = info.type;
  item.count = element_count(info.shape);
  item.gather = true;
  item.source = collective_source::components;
  item.target = collective_target::output;
  item.result = tensor::empty(
    info.type, tensor_shape{int64_t{total_replicas()}, item.count});
  run_collective(timeout, plan,
                 [this, plan, shape = info.shape, type = info.type,
                  done = std::move(done)](caf::expected<ok_atom> r) {
                   if (!r)
                     return done(std::move(r.error()));
                   auto& all = plan->items[0].result;
                   const auto n = static_cast<size_t>(total_replicas());
                   const auto size = all.nbytes() / std::max<size_t>(n, 1);
                   std::vector<tensor> out;
                   out.reserve(n);
                   for (size_t k = 0; k < n; ++k)
                     out.push_back(tensor::from_bytes(
                       type, shape,
                       static_cast<const std::byte*>(all.raw()) + k * size,
                       size));
                   done(std::move(out));
                 });
}

void coordinator_state::survivor_values(
  caf::timespan timeout, uint64_t id,
  reply_fn<std::vector<std::optional<tensor>>> done) {
  auto left = remaining(timeout, "survivor_values");
  if (!left)
    return done(std::move(left.error()));
  timeout = *left;
  auto e = find(id);
  if (!e)
    return done(std::move(e.error()));
  coordinator_record::cross_read((*e)->counts(), reads_.rerunning());
  if (read_barrier::must_wait(**e))
    return reads_.wait<std::vector<std::optional<tensor>>>(
      **e, timeout,
      [this, id, done](caf::timespan t) { survivor_values(t, id, done); },
      done);
  std::vector<size_t> live;
  for (size_t i = 0; i < replicas_.size(); ++i)
    if (!replicas_.failed(i))
      live.push_back(i);
  auto n = replicas_.size();
  // A replica that fails while it is asked is one more missing component,
  // not a failure of the call: the survivors are what it reads (its
  // failure may reach the coordinator after the request left).
  auto lost = std::make_shared<std::vector<bool>>(live.size());
  replicas_.gather<tensor>(
    live.size(), timeout,
    [this, id, live](size_t k) {
      return self_->request(replicas_[live[k]], caf::infinite,
                            component_read_atom::value, id);
    },
    [n, live, lost, done](caf::expected<std::vector<tensor>> r) {
      if (!r)
        return done(std::move(r.error()));
      std::vector<std::optional<tensor>> out(n);
      for (size_t k = 0; k < live.size(); ++k)
        if (!(*lost)[k])
          out[live[k]] = std::move((*r)[k]);
      done(std::move(out));
    },
    replica_set::on_deadline::abandoned, replica_set::fan_out::local, nullptr,
    lost);
}

} // namespace varsync
