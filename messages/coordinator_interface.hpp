#pragma once
// The coordinator's full interface: the public coordinator_actor plus the
// messages only the library sends (closure calls of the blocking and async
// APIs, the replica list, shutdown, the deadline tick).

#include <cstdint>
#include <string>
#include <vector>

#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include "messages/atoms.hpp"
#include "messages/client_call.hpp"
#include "messages/sequenced_operation.hpp"
#include "messages/replica_interface.hpp"
#include "varsync/actor_protocol.hpp"

namespace varsync {

using coordinator_internal_actor = coordinator_actor::extend<
  caf::replies_to<replicas_atom>::with<std::vector<replica_actor>>,
  caf::reacts_to<client_atom, client_call_ptr>,
  // A client call run at once, never queued (metrics snapshots).
  caf::reacts_to<client_now_atom, client_call_ptr>,
  caf::reacts_to<shutdown_atom>,
  caf::reacts_to<sequenced_atom, sequenced_operation>,
  caf::reacts_to<sequencer_down_atom, caf::error>,
  caf::reacts_to<deadline_atom>,
  caf::reacts_to<flight_dump_atom, uint8_t, std::string>,
  caf::reacts_to<flush_writes_atom>>;

} // namespace varsync
