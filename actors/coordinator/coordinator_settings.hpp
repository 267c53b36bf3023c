#pragma once
// What a coordinator is started with, fixed for its life: its deadlines and
// bounds, its collective, and its place among the processes.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <caf/timespan.hpp>

#include "actors/collective_selection.hpp"
#include "devices/memory_budget.hpp"
#include "messages/sequenced_operation.hpp"
#include "sync/transport/process_rounds.hpp"
#include "varsync/internal/by_value.hpp"

namespace varsync {

/// A strategy whose replicas live in several processes.
struct process_layout {
  int rank = 0;
  int processes = 1;
  int first_replica = 0;
  int total_replicas = 0;
  /// Services mode: hands an operation to process 0's sequencer (the
  /// ordered operations come back through the ordering). Empty in training
  /// mode.
  std::function<void(sequenced_operation)> submit_sequenced;
  /// Who kept whom waiting at the processes' rounds (the group's).
  std::shared_ptr<process_rounds> rounds;
};

struct coordinator_settings {
  /// Of a request that names none (the typed actor interface).
  caf::timespan default_timeout = std::chrono::seconds(30);
  /// The strategy's collective algorithm (actors/collective_selection.hpp):
  /// run by the replicas on their slices, or by its driver for all.
  selected_collective collective;
  memory_budget budget;
  /// V3's bounds.
  size_t max_queued_operations = 4096;
  size_t max_queued_bytes = size_t{256} << 20;
  /// Fire-and-forget local adds the replicas refused or could not apply
  /// (shared with them; reported by describe()).
  std::shared_ptr<std::atomic<uint64_t>> local_adds_dropped;
  /// Steps up to this many contribution bytes per replica take the small
  /// path (sync/collectives/small_step.hpp); 0: never.
  size_t small_step_bytes = by_value_bytes;
  /// None in one process.
  std::optional<process_layout> processes;
  /// Metrics (M1-M4): timing on or off, and the stall warning's threshold
  /// (0: off).
  bool collect_metrics = true;
  caf::timespan stall_threshold{0};
  /// M7: record the last operations (across processes: always).
  bool flight_recorder = false;
  /// M8: where the recorder is written when something goes wrong and on
  /// SIGUSR1 (empty: never; set: the recorder is on).
  std::string flight_dump_dir;
};

} // namespace varsync
