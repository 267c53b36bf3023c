#pragma once
// The replica actor of one device: it alone owns that device's memory for
// every component it holds, runs replica steps, and works its slice of host
// collectives. While it is inside a collective (between enter and leave) it
// defers every other request, so no one reads a component that another
// replica is writing.

#include <caf/expected.hpp>
#include <caf/fwd.hpp>

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "varsync/ext/replica_fault.hpp"
#include "varsync/device_id.hpp"
#include "messages/replica_interface.hpp"
#include "varsync/internal/step_report.hpp"
#include "varsync/step_task.hpp"

namespace varsync {

struct replica_config {
  /// The replica's id among all replicas of the strategy (every process).
  int rank = 0;
  int num_replicas = 1;
  device_id device;
  /// Test support: faults injected into this replica.
  std::vector<replica_fault> faults;
  on_step_exception step_exception = on_step_exception::stop_replica;
  /// Local requests (of bound actors) are refused with `overloaded` once
  /// this many operations are deferred (V3).
  size_t max_deferred = 4096;
  /// Counts local adds not applied (shared with the coordinator, which
  /// reports it); none: a counter of the replica's own.
  std::shared_ptr<std::atomic<uint64_t>> local_adds_dropped;
  /// The replica's index among the strategy's replicas in this process: its
  /// slot in a collective plan. -1: `rank` (a strategy of one process).
  int slot = -1;
  /// The strategy's collective checks V4 and W4 on device contributions
  /// (collective_algorithm::checks_device_contributions): every ON_WRITE
  /// contribution of a device replica stays on the device.
  bool collective_checks_device = false;
  /// Spawned hidden (coordinator_config::hidden).
  bool hidden = false;
};

/// Spawns the replica actor of `cfg.device` (device_error if the device
/// cannot be opened).
caf::expected<replica_actor> spawn_replica(caf::actor_system& sys,
                                           const replica_config& cfg);

} // namespace varsync
