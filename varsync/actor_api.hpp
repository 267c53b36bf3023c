#pragma once
// For callers that are actors (the asynchronous path a service uses): the
// coordinator's typed interface and the replica actors, to which actors bound
// to a replica send local reads and updates (replica context outside a step).
// Including this header pulls in CAF's actor headers; varsync/varsync.hpp
// does not.

#include <caf/typed_actor.hpp>

#include "messages/coordinator_interface.hpp"
#include "messages/register_types.hpp"
#include "messages/replica_interface.hpp"
#include "varsync/strategy.hpp"

namespace varsync {

/// The coordinator of `s`: send it create/lookup/read/update/run requests.
coordinator_actor coordinator_of(const strategy& s);

/// The replica actor of replica `r` of `s` (an actor bound to replica r sends
/// it local_read / local_update requests).
replica_actor replica_of(const strategy& s, int r);

} // namespace varsync
