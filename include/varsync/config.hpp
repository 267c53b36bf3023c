#pragma once
// The one call a user makes on their actor_system_config before creating the
// actor system that hosts varsync strategies, and the reader of varsync's
// entries in that config.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

#include <caf/expected.hpp>

namespace caf {
class actor_system_config;
} // namespace caf

namespace varsync {

/// Registers varsync's message types and its error category ("varsync").
void register_types(caf::actor_system_config& cfg);

/// Sets CAF's work-stealing polling for low latency: an idle scheduler
/// thread spins briefly, then sleeps until a message wakes it. CAF's
/// default (sleep 50 µs between polls for the first 25 ms of idleness, not
/// woken by new work) adds up to about 100 µs to every message that reaches
/// an idle thread: a replica step that follows a pause of the caller, or a
/// GPU step whose threads idled while the GPU worked. strategy::create
/// (without an actor system) does this for the system it creates; call it
/// on your own config before creating the system you host strategies in.
/// Sets "work-stealing.moderate-sleep-duration" to 0 (docs/scheduling.md).
void tune_scheduler(caf::actor_system_config& cfg);

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
  /// "varsync.max-queued-operations", 4096 when unset; positive. How many
  /// operations each queue of a strategy may hold before it refuses more
  /// with `overloaded` (V3).
  size_t max_queued_operations = 4096;
  /// "varsync.max-queued-mb" in bytes, 256 MiB when unset; the entry is a
  /// positive number of MiB (at most 16 TiB). The tensor bytes each queue
  /// may hold before it refuses more with `overloaded`.
  size_t max_queued_bytes = size_t{256} << 20;
};

/// Reads "varsync.log-level", "varsync.timeout-ms",
/// "varsync.memory-budget-mb", "varsync.max-queued-operations" and
/// "varsync.max-queued-mb". invalid_argument if the timeout or a queue
/// bound is not a positive integer (the MiB bound at most 2^24), the memory
/// budget not a non-negative integer (of at most 2^44 MiB) or the log level
/// not a string.
caf::expected<config_settings>
read_config(const caf::actor_system_config& cfg);

} // namespace varsync
