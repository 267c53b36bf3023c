// The coordinator: construction, shared helpers, deadlines and admission
// (V3).

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

coordinator_state::coordinator_state(self_pointer self,
                                     std::vector<device_id> devices,
                                     std::vector<replica_actor> replicas,
                                     caf::timespan default_timeout,
                                     selected_collective collective,
                                     memory_budget budget,
                                     size_t max_queued_operations,
                                     size_t max_queued_bytes,
                                     std::shared_ptr<std::atomic<uint64_t>>
                                       local_adds_dropped)
  : self_(self),
    replicas_(self, std::move(devices), std::move(replicas), *this),
    collective_(std::move(collective)),
    budget_(std::move(budget)),
    default_timeout_(default_timeout),
    admission_(max_queued_operations, max_queued_bytes),
    local_adds_dropped_(std::move(local_adds_dropped)) {
  if (!local_adds_dropped_)
    local_adds_dropped_ = std::make_shared<std::atomic<uint64_t>>(0);
}

// -- helpers ------------------------------------------------------------------

std::shared_ptr<collective_plan> coordinator_state::new_plan(std::string what) {
  auto plan = std::make_shared<collective_plan>();
  plan->num_replicas = num_replicas();
  if (processes) {
    plan->cross_process = true;
    plan->total_replicas = processes->total_replicas;
    plan->description = std::move(what);
  }
  return plan;
}

void coordinator_state::agree(caf::timespan timeout, std::string what,
                              caf::error local, reply_fn<ok_atom> done) {
  if (!processes) {
    if (local)
      return done(std::move(local));
    return done(ok_atom::value);
  }
  auto plan = new_plan(std::move(what));
  plan->local_error = std::move(local);
  run_collective(timeout, std::move(plan), std::move(done));
}

caf::expected<coordinator_state::entry*> coordinator_state::find(uint64_t id) {
  return variables_.find(id);
}

shared_variable_info coordinator_state::shared_info(uint64_t id) const {
  return variables_.shared_info(id);
}

caf::error coordinator_state::check_replicas() const {
  return replicas_.check(
    processes ? static_cast<size_t>(processes->first_replica) : 0);
}

std::string coordinator_state::quoted_name_of(uint64_t id) const {
  return variables_.quoted_name_of(id);
}

uint64_t coordinator_state::host_copies_bytes(uint64_t nbytes) const {
  uint64_t out = 0;
  for (auto& d : replicas_.devices())
    if (d.kind == device_kind::host)
      out = saturating_add(out, host_component_footprint(nbytes));
  return out;
}

caf::expected<caf::timespan>
coordinator_state::remaining(caf::timespan timeout, const char* what) const {
  const auto queued_for = admission_.queued_for();
  if (timeout == caf::timespan::max() || queued_for.count() == 0)
    return timeout;
  if (queued_for >= timeout)
    return make_error(errc::timeout,
                      std::string{what} + " waited "
                        + std::to_string(std::chrono::duration_cast<
                                           std::chrono::milliseconds>(queued_for)
                                           .count())
                        + " ms for admission behind other operations, past "
                          "its deadline; it was not started, nothing was "
                          "changed");
  return timeout - queued_for;
}

operation_deadlines::handle coordinator_state::watch(caf::timespan timeout,
                                                     expirable* op) {
  return watch_until(operation_deadlines::clock::now()
                       + std::chrono::duration_cast<
                         operation_deadlines::clock::duration>(timeout),
                     op);
}

operation_deadlines::handle coordinator_state::watch_until(
  operation_deadlines::clock::time_point deadline, expirable* op) {
  auto h = deadlines_.add(deadline, op);
  if (!tick_at_ || deadline < *tick_at_) {
    tick_at_ = deadline;
    auto delay = deadline - operation_deadlines::clock::now();
    if (delay < std::chrono::milliseconds(1))
      delay = std::chrono::milliseconds(1);
    self_->delayed_send(self_, delay, deadline_atom::value);
  }
  return h;
}

void coordinator_state::on_deadline_tick() {
  auto now = operation_deadlines::clock::now();
  if (tick_at_ && *tick_at_ > now)
    return; // an earlier tick that a nearer deadline superseded
  tick_at_.reset();
  deadlines_.expire_due(now);
  if (auto next = deadlines_.next()) {
    tick_at_ = *next;
    auto delay = *next - now;
    if (delay < std::chrono::milliseconds(1))
      delay = std::chrono::milliseconds(1);
    self_->delayed_send(self_, delay, deadline_atom::value);
  }
}

// -- admission -----------------------------------------------------------------

caf::error coordinator_state::refuse_if_full(size_t bytes) const {
  auto err = admission_.refuse_if_full(bytes);
  if (err)
    record_.refused();
  return err;
}

} // namespace varsync
