// The coordinator: creating, finding, listing and destroying variables.

#include "actors/coordinator_state.hpp"

#include <atomic>
#include <memory>
#include <string>

#include <caf/actor_system.hpp>
#include <caf/system_messages.hpp>
#include <caf/exit_reason.hpp>
#include <caf/send.hpp>

#include "actors/collective_driver.hpp"
#include "actors/actor_thread.hpp"
#include "actors/replica_actor.hpp"
#include "varsync/error.hpp"
#include "core/logging.hpp"
#include "sync/collective_path.hpp"
#include "sync/distributed_reduce.hpp"
#include "actors/coordinator_gather.hpp"

namespace varsync {

using namespace coordinator_helpers;

// -- variables ------------------------------------------------------------------

void coordinator_state::create(caf::timespan timeout, variable_spec spec,
                               reply_fn<variable_info> done) {
  auto left = remaining(timeout, "create");
  if (!left)
    return done(std::move(left.error()));
  timeout = *left;
  auto info = validate_variable_spec(spec);
  if (!info)
    return done(std::move(info.error()));
  if (names_.count(info->name) > 0)
    return done(make_error(errc::already_exists,
                           "a variable named " + quote_name(info->name)
                             + " already exists in this strategy"));
  if (auto err = check_replicas())
    return done(std::move(err));
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
  names_.emplace(info->name, id);
  entries_.emplace(id, entry{*info, &policy_for(info->sync), false, 0, {}});
  auto initial = std::move(spec.initial_value);
  gather_ok(
    replicas_.size(), timeout,
    [this, info = *info, initial](size_t i) {
      return self_->request(replicas_[i], caf::infinite, component_create_atom::value,
                            info, initial);
    },
    [this, timeout, id, reserved,
     done = std::move(done)](caf::expected<ok_atom> r) {
      memory_budget::release_reserved(reserved);
      auto i = entries_.find(id);
      if (!r) {
        // V2: undo the components that were created.
        for (auto& replica : replicas_)
          self_->request(replica, timeout, component_destroy_atom::value, id)
            .then([](ok_atom) {}, [](caf::error&) {});
        names_.erase(i->second.info.name);
        entries_.erase(i);
        return done(std::move(r.error()));
      }
      i->second.ready = true;
      log()->debug("created variable '{}' (id {})", i->second.info.name, id);
      done(i->second.info);
    });
}

void coordinator_state::lookup(const std::string& name,
                               reply_fn<variable_info> done) {
  auto i = names_.find(name);
  if (i != names_.end()) {
    auto& e = entries_.at(i->second);
    if (e.ready)
      return done(e.info);
  }
  done(make_error(errc::unknown_variable,
                  "no variable named " + quote_name(name)
                    + " exists in this strategy"));
}

void coordinator_state::list(reply_fn<std::vector<variable_info>> done) {
  std::vector<variable_info> out;
  out.reserve(entries_.size());
  for (auto& [id, e] : entries_)
    if (e.ready)
      out.push_back(e.info);
  std::sort(out.begin(), out.end(),
            [](auto& a, auto& b) { return a.name < b.name; });
  done(std::move(out));
}

void coordinator_state::destroy(caf::timespan timeout, uint64_t id,
                                reply_fn<ok_atom> done) {
  auto left = remaining(timeout, "destroy");
  if (!left)
    return done(std::move(left.error()));
  timeout = *left;
  auto e = find(id);
  if (!e)
    return done(std::move(e.error()));
  names_.erase((*e)->info.name);
  // Reads waiting for this variable's writes run again and find it gone.
  auto waiting = std::move((*e)->waiting_reads);
  entries_.erase(id);
  for (auto& w : waiting)
    if (!w->finished) {
      w->finished = true;
      if (w->watched)
        unwatch(w->deadline);
      w->rerun(w->timeout);
    }
  gather_ok(
    replicas_.size(), timeout,
    [this, id](size_t i) {
      return self_->request(replicas_[i], caf::infinite,
                            component_destroy_atom::value, id);
    },
    std::move(done), on_deadline::committed);
}

} // namespace varsync
