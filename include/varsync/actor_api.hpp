#pragma once
// For callers that are actors (the asynchronous path a service uses): the
// coordinator's typed interface and, for actors bound to a replica (replica
// context outside a step), that replica's local interface. Including this
// header pulls in CAF's typed actor headers; varsync/varsync.hpp does not.

#include "varsync/actor_protocol.hpp"
#include "varsync/config.hpp"
#include "varsync/strategy.hpp"

namespace varsync {

/// The coordinator of `s`: send it create/lookup/read/update/run requests.
/// Its actor system is `coordinator_of(s)->home_system()`. An invalid
/// handle once that system has been destroyed.
coordinator_actor coordinator_of(const strategy& s);

/// Replica `r` of `s` (its global id: across processes, one of this
/// process's, first_local_replica() onwards) as seen by an actor bound to
/// it: local_read / local_update only. An invalid handle when `r` is out of
/// range or in another process.
replica_local_actor replica_of(const strategy& s, int r);

} // namespace varsync
