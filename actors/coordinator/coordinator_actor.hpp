#pragma once
// Spawning a strategy: one coordinator and one replica actor per device.

#include <cstddef>
#include <optional>
#include <vector>

#include <caf/expected.hpp>
#include <caf/fwd.hpp>
#include <caf/timespan.hpp>

#include "sync/transport/process_group.hpp"
#include "varsync/ext/replica_fault.hpp"
#include "varsync/internal/by_value.hpp"
#include "varsync/device_id.hpp"
#include "messages/coordinator_interface.hpp"
#include "varsync/internal/step_report.hpp"
#include "varsync/step_task.hpp"

namespace varsync {

struct coordinator_config {
  std::vector<device_id> devices;
  /// Deadline of each request the coordinator sends to a replica when the
  /// caller gave none (the typed actor interface).
  caf::timespan default_timeout = std::chrono::seconds(30);
  /// Test support: faults injected into replicas.
  std::vector<replica_fault> faults;
  on_step_exception step_exception = on_step_exception::stop_replica;
  /// The host memory budget in bytes; 0: automatic (devices/memory_budget.hpp).
  uint64_t memory_budget_bytes = 0;
  /// Overload bounds (V3): actor requests waiting for admission, and local
  /// requests a replica defers, beyond these are refused with `overloaded`.
  size_t max_queued_operations = 4096;
  size_t max_queued_bytes = size_t{256} << 20;
  /// Steps up to this many contribution bytes per replica take the small
  /// path (sync/collectives/small_step.hpp); 0: never.
  size_t small_step_bytes = by_value_bytes;
  /// Metrics (M1-M4): timing on or off, and the stall warning's threshold
  /// (0: no warnings).
  bool collect_metrics = true;
  caf::timespan stall_threshold = std::chrono::seconds(1);
  /// M7 in one process (across processes: always).
  bool flight_recorder = false;
  /// M8: where the recorder is dumped (empty: never).
  std::string flight_dump_dir;
  /// A strategy over several processes: the joined group, and where this
  /// process's replicas stand in it (sync/transport/process_group.hpp).
  std::optional<process_membership> processes;
  /// Spawn the coordinator, the replicas and the driver hidden: the actor
  /// system's lifetime watch waits for them (actors/spawn_hidden.hpp).
  bool hidden = false;
};

/// Spawns the replicas of `cfg.devices` and their coordinator. Fails with
/// invalid_argument for an empty device list and device_error for a device
/// that cannot be opened.
caf::expected<coordinator_internal_actor> spawn_coordinator(caf::actor_system& sys,
                                                   coordinator_config cfg);

} // namespace varsync
