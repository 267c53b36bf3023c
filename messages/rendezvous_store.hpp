#pragma once
// The rendezvous store of a process group: a key-value table that one
// process hosts and every process reaches over CAF's network layer, so that
// collective engines (Gloo) exchange their connection details through
// varsync's control plane instead of a store of their own.

#include <string>
#include <vector>

#include <caf/actor_control_block.hpp>
#include <caf/atom.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include "varsync/actor_protocol.hpp"

namespace varsync {

using store_set_atom = caf::atom_constant<caf::atom("vs_stset")>;
using store_get_atom = caf::atom_constant<caf::atom("vs_stget")>;
using store_set_actor_atom = caf::atom_constant<caf::atom("vs_stseta")>;
using store_get_actor_atom = caf::atom_constant<caf::atom("vs_stgeta")>;

/// set(key, bytes) stores; a key is set once (setting it again with the
/// same bytes is a no-op, with other bytes invalid_argument), so that no
/// peer replaces what a rank published. get(key) answers once the key is
/// set (the caller's request timeout bounds the wait). set_actor(name,
/// handle) / get_actor(name) do the same for an actor of the hosting
/// process, and only the hosting process may set one: the others reach it
/// over the connection they hold to the store, not over one of its own
/// (each extra connection CAF makes is one more handshake that can stall,
/// and CAF 0.17's remote_actor waits for it without a deadline). The port
/// is unauthenticated: the store bounds what any peer can make it hold
/// (rendezvous_store_limits) and refuses the rest with invalid_argument or
/// overloaded, changing nothing.
/// What one store holds at most: a rendezvous of P ranks needs a few keys
/// of a few hundred bytes per rank.
struct rendezvous_store_limits {
  static constexpr size_t key_bytes = 256;
  static constexpr size_t value_bytes = size_t{1} << 20;
  static constexpr size_t total_bytes = size_t{64} << 20;
  static constexpr size_t keys = 65536;
  static constexpr size_t waiting_gets = 4096;
};

using rendezvous_store_actor = caf::typed_actor<
  caf::replies_to<store_set_atom, std::string, std::vector<char>>::with<
    ok_atom>,
  caf::replies_to<store_get_atom, std::string>::with<std::vector<char>>,
  caf::replies_to<store_set_actor_atom, std::string,
                  caf::strong_actor_ptr>::with<ok_atom>,
  caf::replies_to<store_get_actor_atom, std::string>::with<
    caf::strong_actor_ptr>>;

} // namespace varsync
