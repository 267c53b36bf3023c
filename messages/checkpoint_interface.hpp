#pragma once
// The typed interface of a checkpoint actor (varsync/checkpoint_actor.hpp):
// save / restore / save_survivors requests for actors that must not block. Both reply ok_atom
// or an error (see varsync/checkpoint.hpp); an empty name list selects every
// variable.

#include <string>
#include <vector>

#include <caf/atom.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include "messages/atoms.hpp"

namespace varsync {

using checkpoint_save_atom = caf::atom_constant<caf::atom("vs_cksave")>;
using checkpoint_restore_atom = caf::atom_constant<caf::atom("vs_ckrest")>;
/// save_survivors; the bool is survivor_options::aggregate_survivors.
using checkpoint_save_survivors_atom
  = caf::atom_constant<caf::atom("vs_cksurv")>;

using checkpoint_actor = caf::typed_actor<
  caf::replies_to<checkpoint_save_atom, std::string,
                  std::vector<std::string>>::with<ok_atom>,
  caf::replies_to<checkpoint_restore_atom, std::string,
                  std::vector<std::string>>::with<ok_atom>,
  caf::replies_to<checkpoint_save_survivors_atom, std::string,
                  std::vector<std::string>, bool>::with<ok_atom>>;

} // namespace varsync
