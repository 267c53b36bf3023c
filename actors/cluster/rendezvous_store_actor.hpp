#pragma once
// The actor behind rendezvous_store_actor (messages/rendezvous_store.hpp).

#include <caf/actor_system.hpp>

#include "messages/rendezvous_store.hpp"

namespace varsync {

/// An empty store. Gets of keys not yet set wait (their promises are kept
/// until the key is set or the actor stops).
rendezvous_store_actor spawn_rendezvous_store(caf::actor_system& sys);

} // namespace varsync
