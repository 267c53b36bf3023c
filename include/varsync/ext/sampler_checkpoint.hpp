#pragma once
// A sampler's position in a checkpoint (rule I7 of docs/semantics.md): kept
// in an ordinary variable of the strategy, so save() and restore() carry it
// with the weights. record_position before save; restore_position after
// restore continues the epoch where the checkpoint left it, sharing what is
// left of it among the sampler's replicas, however many they are now.

#include <string>

#include <caf/error.hpp>
#include <caf/expected.hpp>

#include "varsync/ext/sampler.hpp"
#include "varsync/strategy.hpp"
#include "varsync/variable.hpp"

namespace varsync::input {

/// Elements of the position variable (int64, shape [position_fields]):
/// layout version (1), num_items, seed (its bits), shuffle, started,
/// epoch, offset, step.
inline constexpr int position_fields = 8;

/// Creates `name`, an ON_WRITE int64 variable (aggregation
/// only_first_replica, not trainable) holding the sampler's position now.
/// Errors as create_variable's.
caf::expected<variable> create_position_variable(const strategy& s,
                                                 const distributed_sampler& sampler,
                                                 std::string name);

/// Assigns the sampler's position to `position` (a cross-replica assign:
/// across processes every process calls it, and a process whose sampler
/// stands elsewhere fails it with mismatched_replica_updates, P6).
caf::error record_position(const strategy& s, const variable& position,
                           const distributed_sampler& sampler);

/// Moves `sampler` to the position `position` holds (after restore()).
/// checkpoint_mismatch when it was recorded for another dataset size, seed
/// or shuffle, or is not a position variable; checkpoint_corrupt for a
/// position outside the dataset. On any error the sampler is unchanged.
caf::error restore_position(const strategy& s, const variable& position,
                            distributed_sampler& sampler);

} // namespace varsync::input
