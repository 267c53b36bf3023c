#pragma once
// The typed interface of a strategy's coordinator: the asynchronous entry
// point for callers that are actors. Variables are addressed by the id that
// create / lookup return.

#include <cstdint>
#include <string>
#include <vector>

#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include "core/tensor.hpp"
#include "messages/atoms.hpp"
#include "messages/client_call.hpp"
#include "messages/replica_interface.hpp"
#include "messages/step.hpp"
#include "messages/strategy_description.hpp"
#include "messages/variable_info.hpp"

namespace varsync {

using coordinator_actor = caf::typed_actor<
  caf::replies_to<create_atom, variable_spec>::with<variable_info>,
  caf::replies_to<lookup_atom, std::string>::with<variable_info>,
  caf::replies_to<list_atom>::with<std::vector<variable_info>>,
  caf::replies_to<destroy_atom, uint64_t>::with<ok_atom>,
  // Cross-replica context.
  caf::replies_to<read_atom, uint64_t>::with<tensor>,
  caf::replies_to<update_atom, uint64_t, update_op, tensor>::with<ok_atom>,
  caf::replies_to<values_atom, uint64_t>::with<std::vector<tensor>>,
  // A replica step; per-replica results stay in the step object.
  caf::replies_to<run_atom, replica_step_ptr>::with<ok_atom>,
  // Batch all-reduce of per-replica values: inner vectors hold N values.
  caf::replies_to<allreduce_atom, reduce_op,
                  std::vector<std::vector<tensor>>>::with<std::vector<tensor>>,
  caf::replies_to<describe_atom>::with<strategy_description>,
  caf::replies_to<replicas_atom>::with<std::vector<replica_actor>>,
  caf::reacts_to<client_atom, client_call_ptr>,
  caf::reacts_to<shutdown_atom>,
  // Internal: deadline timer tick.
  caf::reacts_to<deadline_atom>>;

} // namespace varsync
