// The coordinator: creating, finding, listing and destroying variables.

#include "actors/coordinator/coordinator_state.hpp"

#include <atomic>
#include <memory>
#include <string>

#include <caf/actor_system.hpp>
#include <caf/system_messages.hpp>
#include <caf/exit_reason.hpp>
#include <caf/send.hpp>

#include "actors/actor_thread.hpp"
#include "actors/replica/replica_actor.hpp"
#include "varsync/error.hpp"
#include "core/logging.hpp"
#include "sync/distributed_reduce.hpp"
#include "actors/coordinator/coordinator_helpers.hpp"

namespace varsync {

using namespace coordinator_helpers;

// -- variables ------------------------------------------------------------------

void coordinator_state::create(caf::timespan timeout, variable_spec spec,
                               reply_fn<shared_variable_info> done) {
  const std::string what = "create '" + spec.name + "'";
  auto left = remaining(timeout, "create");
  if (!left)
    return fail_agreed(*this, timeout, what, std::move(left.error()), std::move(done));
  timeout = *left;
  auto info = validate_variable_spec(spec);
  caf::error local;
  if (!info)
    local = std::move(info.error());
  else if (variables_.taken(info->name))
    local = make_error(errc::already_exists,
                       "a variable named " + quote_name(info->name)
                         + " already exists in this strategy");
  else
    local = check_replicas();
  if (local)
    return fail_agreed(*this, timeout, what, std::move(local), std::move(done));
  if (!processes)
    return create_here(timeout, std::move(spec), std::move(*info),
                       std::move(done));
  // Across processes every replica starts from process 0's initial value
  // (as TensorFlow's multi-worker strategy broadcasts the chief's).
  auto plan = new_plan(what + " (" + std::string{to_string(info->type)}
                       + to_string(info->shape) + ", "
                       + std::string{to_string(info->sync)} + ", "
                       + std::string{to_string(info->agg)} + ")");
  auto& item = plan->add_item();
  item.name = info->name;
  item.type = info->type;
  item.count = element_count(info->shape);
  item.first_only = true;
  item.source = collective_source::contributions;
  item.target = collective_target::output;
  item.contributions.assign(replicas_.size(), spec.initial_value);
  item.result = tensor::empty(info->type, info->shape);
  run_collective(timeout, plan,
                 [this, timeout, plan, spec = std::move(spec),
                  info = std::move(*info),
                  done = std::move(done)](caf::expected<ok_atom> r) mutable {
                   if (!r)
                     return done(std::move(r.error()));
                   spec.initial_value = std::move(plan->items[0].result);
                   create_here(timeout, std::move(spec), std::move(info),
                               std::move(done));
                 });
}

void coordinator_state::create_here(caf::timespan timeout, variable_spec spec,
                                    variable_info info_value,
                                    reply_fn<shared_variable_info> done) {
  auto info = &info_value;
  if (variables_.taken(info->name)) // created meanwhile
    return done(make_error(errc::already_exists,
                           "a variable named " + quote_name(info->name)
                             + " already exists in this strategy"));
  // The components' memory is reserved before anything changes: a variable
  // that does not fit is out_of_memory, not a process the kernel kills when
  // the replicas touch their pages. The replicas' allocations take over the
  // count when they reply.
  auto nbytes = spec.initial_value.nbytes();
  auto reserved = host_copies_bytes(nbytes);
  if (auto err = budget_.reserve(
        reserved, "variable " + quote_name(info->name) + " ("
                    + std::to_string(num_replicas()) + " components of "
                    + std::to_string(nbytes) + " bytes)"))
    return done(std::move(err));
  info->id = next_variable_id();
  auto id = info->id;
  auto shared = make_shared_variable_info(std::move(*info));
  variables_.add(shared);
  auto initial = std::move(spec.initial_value);
  replicas_.gather_ok(
    replicas_.size(), timeout,
    [this, shared, initial](size_t i) {
      return self_->request(replicas_[i], caf::infinite, component_create_atom::value,
                            shared, initial);
    },
    [this, timeout, id, reserved,
     done = std::move(done)](caf::expected<ok_atom> r) {
      memory_budget::release_reserved(reserved);
      auto* e = variables_.any(id);
      if (!r) {
        // V2: undo the components that were created.
        for (auto& replica : replicas_)
          self_->request(replica, timeout, component_destroy_atom::value, id)
            .then([](ok_atom) {}, [](caf::error&) {});
        variables_.erase(id);
        return done(std::move(r.error()));
      }
      e->ready = true;
      log()->debug("created variable '{}' (id {})", e->info->name, id);
      waits_.appeared(e->info);
      done(e->info);
    });
}

void coordinator_state::lookup(const std::string& name,
                               reply_fn<shared_variable_info> done) {
  if (auto info = existing(name))
    return done(std::move(info));
  done(make_error(errc::unknown_variable,
                  "no variable named " + quote_name(name)
                    + " exists in this strategy"));
}

shared_variable_info coordinator_state::existing(const std::string& name) const {
  return variables_.existing(name);
}

void coordinator_state::list(reply_fn<std::vector<variable_info>> done) {
  done(variables_.list());
}

void coordinator_state::destroy(caf::timespan timeout, uint64_t id,
                                reply_fn<ok_atom> done) {
  auto left = remaining(timeout, "destroy");
  auto e = find(id);
  if (!left || !e) {
    auto err = !left ? std::move(left.error()) : std::move(e.error());
    // Across processes a failure here still takes part in the round.
    return processes ? fail_agreed(*this, timeout, "destroy of " + quoted_name_of(id),
                                   std::move(err), std::move(done))
                     : done(std::move(err));
  }
  if (!processes)
    return destroy_here(*left, id, std::move(done));
  // The processes agree first: every one destroys its components.
  agree(*left, "destroy of '" + (*e)->info->name + "'", {},
        [this, timeout = *left, id,
         done = std::move(done)](caf::expected<ok_atom> r) mutable {
          if (!r)
            return done(std::move(r.error()));
          destroy_here(timeout, id, std::move(done));
        });
}

void coordinator_state::destroy_here(caf::timespan timeout, uint64_t id,
                                     reply_fn<ok_atom> done) {
  auto e = find(id);
  if (!e)
    return done(std::move(e.error()));
  // Reads waiting for this variable's writes run again and find it gone.
  auto waiting = std::move((*e)->waiting_reads);
  variables_.erase(id);
  reads_.release(std::move(waiting));
  replicas_.gather_ok(
    replicas_.size(), timeout,
    [this, id](size_t i) {
      return self_->request(replicas_[i], caf::infinite,
                            component_destroy_atom::value, id);
    },
    std::move(done), replica_set::on_deadline::committed);
}

} // namespace varsync
