#pragma once
// The one call a user makes on their actor_system_config before creating the
// actor system that hosts varsync strategies, and the reader of varsync's
// entries in that config.

#include <chrono>
#include <cstdint>
#include <string>

#include <caf/expected.hpp>

namespace caf {
class actor_system_config;
} // namespace caf

namespace varsync {

/// Registers varsync's message types and its error category ("varsync").
void register_types(caf::actor_system_config& cfg);

/// varsync's entries of an actor system config. They are outside input: a
/// config file, the command line or cfg.set() of the application.
struct config_settings {
  /// "varsync.log-level" when it names a level (set_log_level accepts it).
  std::string log_level;
  /// "varsync.log-level" when it does not name a level (ignored, warned about).
  std::string unknown_log_level;
  /// "varsync.timeout-ms", 30 s when unset; positive.
  std::chrono::milliseconds timeout{30000};
  /// "varsync.memory-budget-mb" in bytes; 0 (the default): automatic.
  uint64_t memory_budget_bytes = 0;
};

/// Reads "varsync.log-level", "varsync.timeout-ms" and
/// "varsync.memory-budget-mb". invalid_argument if the timeout is not a
/// positive integer, the budget not a non-negative integer (of at most
/// 2^44 MiB) or the log level not a string.
caf::expected<config_settings>
read_config(const caf::actor_system_config& cfg);

} // namespace varsync
