#pragma once
// An actor that saves and restores a strategy's variables on request
// (varsync/actor_protocol.hpp). It never blocks: each request is
// delegated to a short-lived detached worker that does the file I/O and the
// blocking strategy calls, and replies to the requester directly.

#include "varsync/actor_protocol.hpp"
#include "varsync/strategy.hpp"

namespace varsync {

/// Spawns a checkpoint actor in the actor system of `s`. It holds a handle
/// to `s`; send it an exit message (or let all references go) to stop it.
/// An invalid handle once the actor system of `s` has been destroyed.
checkpoint_actor spawn_checkpoint_actor(const strategy& s);

} // namespace varsync
