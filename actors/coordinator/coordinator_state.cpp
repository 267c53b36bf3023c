// The coordinator: construction, shared helpers, deadlines and admission
// (V3).

#include "actors/coordinator/coordinator_state.hpp"

#include <atomic>
#include <memory>
#include <string>

#include <caf/actor_cast.hpp>
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
                                     coordinator_settings settings)
  : small_step_bytes(settings.small_step_bytes),
    processes(std::move(settings.processes)),
    self_(self),
    default_timeout_(settings.default_timeout),
    collective_(std::move(settings.collective)),
    budget_(std::move(settings.budget)),
    local_adds_dropped_(std::move(settings.local_adds_dropped)),
    deadlines_([self](operation_deadlines::clock::duration delay) {
      self->delayed_send(self, delay, deadline_atom::value);
    }),
    replicas_(self, std::move(devices), std::move(replicas), *this,
              deadlines_),
    admission_(settings.max_queued_operations, settings.max_queued_bytes),
    dumps_(std::move(settings.flight_dump_dir),
           processes ? processes->rank : 0) {
  if (settings.flight_recorder || processes || dumps_.enabled())
    flight_ = std::make_shared<flight_recorder>();
  if (dumps_.enabled())
    dump_when_failing();
  if (!local_adds_dropped_)
    local_adds_dropped_ = std::make_shared<std::atomic<uint64_t>>(0);
  record_.configure(replicas_.size(),
                    processes ? processes->first_replica : 0,
                    settings.stall_threshold, settings.collect_metrics);
  choose_ordering();
}

// M8: a failed operation whose error is an alarm (flight_dumps::alarm_of)
// asks this coordinator for a dump, which it writes after the answer (the
// failure may come on another thread); so does SIGUSR1.
void coordinator_state::dump_when_failing() {
  caf::weak_actor_ptr me{self_->ctrl()};
  flight_->on_failure([me](const caf::error& err) {
    auto why = flight_dumps::alarm_of(err);
    if (!why)
      return;
    if (auto strong = me.lock())
      caf::anon_send(caf::actor_cast<coordinator_internal_actor>(strong),
                     flight_dump_atom::value, static_cast<uint8_t>(*why),
                     varsync::describe(err));
  });
  dump_on_signal(caf::strong_actor_ptr{self_->ctrl()});
}

// -- helpers ------------------------------------------------------------------

std::shared_ptr<collective_plan> coordinator_state::new_plan(std::string what) {
  auto plan = std::make_shared<collective_plan>();
  plan->num_replicas = num_replicas();
  if (processes) {
    plan->cross_process = true;
    plan->total_replicas = processes->total_replicas;
    plan->description = std::move(what);
    // M7: the stages its rounds pass are the operation's phases.
    if (flight_ && flight_now_ != 0)
      plan->on_phase = [flight = flight_, id = flight_now_](const char* p) {
        flight->reached(id, p);
      };
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
  if (!local)
    return run_collective(timeout, std::move(plan), std::move(done));
  // A process that failed gets its own error back, whatever the round
  // makes of it (an error of another category would come back wrapped).
  plan->local_error = local;
  run_collective(timeout, std::move(plan),
                 [local = std::move(local),
                  done = std::move(done)](caf::expected<ok_atom>) mutable {
                   done(std::move(local));
                 });
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

// -- admission -----------------------------------------------------------------

caf::error coordinator_state::refuse_if_full(size_t bytes) const {
  auto err = admission_.refuse_if_full(bytes);
  if (err)
    record_.refused();
  return err;
}

} // namespace varsync
