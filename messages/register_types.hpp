#pragma once
// The one call a user makes on their actor_system_config before creating the
// actor system that hosts varsync strategies.

namespace caf {
class actor_system_config;
} // namespace caf

namespace varsync {

/// Registers varsync's message types and its error category ("varsync").
void register_types(caf::actor_system_config& cfg);

} // namespace varsync
