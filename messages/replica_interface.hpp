#pragma once
// A replica actor's full interface: the public replica_local_actor (local
// reads and updates of actors bound to the replica) plus the component,
// step and collective messages that only the coordinator sends: the replica
// refuses them from any other sender (the first bind_atom names the
// coordinator).

#include <cstdint>

#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include "messages/atoms.hpp"
#include "messages/collective.hpp"
#include "messages/component_writes.hpp"
#include "messages/replica_usage.hpp"
#include "messages/shared_variable_info.hpp"
#include "varsync/actor_protocol.hpp"
#include "varsync/internal/step_report.hpp"

namespace varsync {

using replica_actor = replica_local_actor::extend<
  caf::reacts_to<bind_atom>,
  caf::replies_to<component_create_atom, shared_variable_info,
                  tensor>::with<ok_atom>,
  caf::replies_to<component_destroy_atom, uint64_t>::with<ok_atom>,
  caf::replies_to<component_read_atom, uint64_t>::with<tensor>,
  caf::replies_to<component_update_atom, uint64_t, update_op,
                  tensor>::with<ok_atom>,
  caf::replies_to<component_split_atom, uint64_t, tensor>::with<ok_atom>,
  // Writes in their order, one outcome each (messages/component_writes.hpp).
  caf::replies_to<component_writes_atom,
                  component_writes_ptr>::with<write_outcomes>,
  // A cross-replica scatter's rows (ascending, S5); true: this
  // replica's R4 share of each row (S4).
  caf::replies_to<component_scatter_atom, recorded_update,
                  bool>::with<ok_atom>,
  // Steps are numbered by the coordinator; step_release ends step S on the
  // replica (its staging buffers), in order after the step itself.
  caf::replies_to<step_atom, uint64_t, replica_step_ptr>::with<step_report>,
  caf::reacts_to<step_release_atom, uint64_t>,
  // X2: a step that answered `suspended` goes on with the result of its
  // collective (and answers again), or is abandoned.
  caf::replies_to<step_resume_atom, uint64_t,
                  std::vector<tensor>>::with<step_report>,
  caf::reacts_to<step_abort_atom, uint64_t>,
  // A small step (sync/collectives/small_step.hpp): the combined value of each update,
  // applied in order, all or none.
  caf::replies_to<step_apply_atom, std::vector<recorded_update>>::with<ok_atom>,
  // Host collectives: enter answers the index of the first item whose
  // contribution from this replica differs from replica 0's where the plan
  // requires equality, or -1.
  caf::replies_to<collective_enter_atom, collective_run_ptr>::with<int64_t>,
  caf::replies_to<collective_work_atom, collective_run_ptr>::with<ok_atom>,
  caf::reacts_to<collective_leave_atom>,
  caf::replies_to<usage_atom>::with<replica_usage>,
  // Fault injection (delayed operations).
  caf::reacts_to<resume_atom>>;

} // namespace varsync
