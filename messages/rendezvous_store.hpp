#pragma once
// The rendezvous store of a process group: a key-value table that one
// process hosts and every process reaches over CAF's network layer, so that
// collective engines (Gloo) exchange their connection details through
// varsync's control plane instead of a store of their own.

#include <string>
#include <vector>

#include <caf/atom.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include "varsync/atoms.hpp"

namespace varsync {

using store_set_atom = caf::atom_constant<caf::atom("vs_stset")>;
using store_get_atom = caf::atom_constant<caf::atom("vs_stget")>;

/// set(key, bytes) stores (a later set of the same key replaces it);
/// get(key) answers once the key is set (the caller's request timeout bounds
/// the wait).
using rendezvous_store_actor = caf::typed_actor<
  caf::replies_to<store_set_atom, std::string, std::vector<char>>::with<
    ok_atom>,
  caf::replies_to<store_get_atom, std::string>::with<std::vector<char>>>;

} // namespace varsync
