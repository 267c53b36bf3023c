#pragma once
// The typed interface of a replica actor. The coordinator is the only sender
// of component and collective messages; actors bound to a replica (replica
// context outside a step) send local reads and updates directly.

#include <cstdint>

#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include "core/tensor.hpp"
#include "messages/atoms.hpp"
#include "messages/collective.hpp"
#include "messages/step.hpp"
#include "messages/variable_info.hpp"

namespace varsync {

using replica_actor = caf::typed_actor<
  // Components (coordinator only).
  caf::replies_to<component_create_atom, variable_info, tensor>::with<ok_atom>,
  caf::replies_to<component_destroy_atom, uint64_t>::with<ok_atom>,
  caf::replies_to<component_read_atom, uint64_t>::with<tensor>,
  caf::replies_to<component_update_atom, uint64_t, update_op,
                  tensor>::with<ok_atom>,
  caf::replies_to<component_split_atom, uint64_t, tensor>::with<ok_atom>,
  caf::replies_to<step_atom, replica_step_ptr>::with<step_report>,
  // Host collectives (coordinator only): enter answers the index of the first
  // item whose contribution from this replica differs from replica 0's where
  // the plan requires equality, or -1.
  caf::replies_to<collective_enter_atom, collective_plan_ptr>::with<int64_t>,
  caf::replies_to<collective_work_atom, collective_plan_ptr>::with<ok_atom>,
  caf::reacts_to<collective_leave_atom>,
  // Replica context outside a step (actors bound to this replica).
  caf::replies_to<local_read_atom, uint64_t>::with<tensor>,
  caf::replies_to<local_update_atom, uint64_t, update_op,
                  tensor>::with<ok_atom>,
  // Internal: fault injection (delayed operations).
  caf::reacts_to<resume_atom>>;

} // namespace varsync
