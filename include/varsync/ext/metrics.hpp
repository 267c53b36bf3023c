#pragma once
// What synchronization costs, as a strategy observed it (rows M1-M6,
// docs/metrics.md): per variable, per replica, per process and for the
// strategy. strategy::metrics() takes a snapshot; to_json and to_prometheus
// render one. Counting is a few integer increments per operation and one
// clock read per collective and per step reply; nothing is computed until a
// snapshot is asked for.

#include <cstdint>
#include <string>
#include <vector>

#include <caf/meta/load_callback.hpp>
#include <caf/meta/type_name.hpp>
#include <caf/sec.hpp>

#include "varsync/synchronization.hpp"

namespace varsync {

/// One variable. Counts are since the variable was created, in this
/// process (each process of a strategy counts what its replicas and its
/// coordinator did).
struct variable_metrics {
  uint64_t id = 0;
  std::string name;
  /// As resolved at creation (auto_ is on_write).
  synchronization sync = synchronization::on_write;
  aggregation agg = aggregation::none;
  /// As created (C4).
  bool trainable = true;
  /// The size of one component.
  uint64_t bytes = 0;
  /// Replica context, summed over this process's replicas: reads
  /// (ctx.read, local_read) and updates (assign*, scatter*, update_mirrored,
  /// device updates; fire-and-forget local adds included).
  uint64_t replica_reads = 0;
  uint64_t replica_updates = 0;
  /// Cross-replica context: reads (read, all_values, local_values) and
  /// updates (assign*, scatter*) that found the variable.
  uint64_t cross_replica_reads = 0;
  uint64_t cross_replica_updates = 0;
  /// Steps that ended with an ON_WRITE update of the variable.
  uint64_t steps_updated = 0;
  /// Collectives the variable took part in (a fused step counts once for
  /// each of its variables), the bytes they read from this process's
  /// replicas (one value per replica, or its rows for a sparse update) and
  /// the wall time they took (a fused collective's time is counted for
  /// each of its variables).
  uint64_t collectives = 0;
  uint64_t bytes_moved = 0;
  double collective_seconds = 0;
  /// In steps that updated the variable: how long the first replica to
  /// answer waited for the last one (the step's collective cannot start
  /// before every replica has answered).
  double waiting_seconds = 0;
};

/// One replica of this process.
struct replica_metrics {
  int replica = 0;
  std::string device;
  /// Step rounds it answered (a coroutine step answers once per collective
  /// inside it, and once at its end).
  uint64_t step_rounds = 0;
  /// Rounds in which it answered last, and the time it kept the others
  /// waiting in them (from the second-to-last answer to its own).
  uint64_t slowest = 0;
  double kept_waiting_seconds = 0;
  /// Rounds in which that time passed the stall threshold.
  uint64_t stalls = 0;
  /// Local requests it holds back now (while a collective or a waiting
  /// step runs) and requests it refused as overloaded.
  uint64_t deferred = 0;
  uint64_t refusals = 0;
  bool failed = false;
  /// It did not answer within 0.5 s (busy in a long step): its counts are
  /// those of an earlier snapshot.
  bool counts_stale = false;
};

/// One process of a strategy that spans several (empty in one process):
/// measured at the processes' collective rounds, as this process saw them.
struct process_metrics {
  int rank = 0;
  /// Rounds in which it arrived last, and the time it kept the others
  /// waiting (from the second-to-last arrival to its own).
  uint64_t slowest = 0;
  double kept_waiting_seconds = 0;
  uint64_t stalls = 0;
};

struct strategy_metrics {
  /// This process's rank and the processes of the strategy.
  int process_rank = 0;
  int processes = 1;
  double uptime_seconds = 0;
  uint64_t steps = 0;
  uint64_t collectives = 0;
  double collective_seconds = 0;
  uint64_t bytes_moved = 0;
  /// Time this process waited for the other processes at collective
  /// rounds (0 in one process).
  double waiting_for_processes_seconds = 0;
  /// Now: operations running in the coordinator, operations and bytes
  /// waiting for admission, calls of the blocking and async APIs sent and
  /// not yet answered, and requests the replicas hold back.
  uint64_t in_flight = 0;
  uint64_t queued_operations = 0;
  uint64_t queued_bytes = 0;
  uint64_t outstanding_calls = 0;
  uint64_t deferred_on_replicas = 0;
  /// Since creation: operations that completed, those refused as
  /// overloaded (by the API, the coordinator or a replica), those that hit
  /// their deadline (timeout, committed_late), and those that failed
  /// otherwise; fire-and-forget local adds that were not applied.
  uint64_t completed = 0;
  uint64_t refusals = 0;
  uint64_t deadlines_hit = 0;
  uint64_t errors = 0;
  uint64_t local_adds_dropped = 0;
  /// Group commit (one process): cross-replica writes sent to the
  /// replicas, and the groups that carried them, one message per replica
  /// each (writes_sent / write_groups: the mean group).
  uint64_t writes_sent = 0;
  uint64_t write_groups = 0;
  /// Services mode, the operations issued here: the bytes of tensors they
  /// carried inline over CAF to process 0's sequencer (by_value_bytes at
  /// most each, varsync/internal/by_value.hpp), and those that went through the
  /// process group instead (P2).
  uint64_t services_inline_bytes = 0;
  uint64_t services_data_plane_bytes = 0;
  /// Services mode's group commit (P17): the agreement rounds that decided
  /// cross-replica updates together, and the updates they decided
  /// (grouped updates / rounds: the mean group).
  uint64_t services_group_rounds = 0;
  uint64_t services_grouped_updates = 0;
  /// The stall warning's threshold (0: off).
  double stall_threshold_seconds = 0;
  std::vector<replica_metrics> replicas;
  std::vector<process_metrics> process_rounds;
  /// Sorted by name.
  std::vector<variable_metrics> variables;
};

/// The snapshot as one JSON object (the field names of these structs).
std::string to_json(const strategy_metrics& m);

/// The snapshot in the Prometheus text exposition format (version 0.0.4):
/// varsync_* metric families, counters suffixed _total, with labels
/// variable, sync, aggregation, context, replica, device, process.
std::string to_prometheus(const strategy_metrics& m);

namespace detail {
/// Seconds in a snapshot: finite and not negative (CAF 0.17 cannot even
/// serialize an infinity: its IEEE 754 packing never ends).
inline bool is_seconds(double x) {
  return x >= 0 && x <= 1e18;
}
} // namespace detail

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, variable_metrics& x) {
  // V4: enums out of range never leave deserialization.
  auto load = caf::meta::load_callback([&]() -> caf::error {
    if (!is_valid(x.sync) || !is_valid(x.agg)
        || !detail::is_seconds(x.collective_seconds)
        || !detail::is_seconds(x.waiting_seconds))
      return caf::sec::invalid_argument;
    return caf::none;
  });
  return f(caf::meta::type_name("varsync::variable_metrics"), x.id, x.name,
           x.sync, x.agg, x.trainable, x.bytes, x.replica_reads,
           x.replica_updates,
           x.cross_replica_reads, x.cross_replica_updates, x.steps_updated,
           x.collectives, x.bytes_moved, x.collective_seconds,
           x.waiting_seconds, load);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, replica_metrics& x) {
  auto load = caf::meta::load_callback([&]() -> caf::error {
    if (!detail::is_seconds(x.kept_waiting_seconds))
      return caf::sec::invalid_argument;
    return caf::none;
  });
  return f(caf::meta::type_name("varsync::replica_metrics"), x.replica,
           x.device, x.step_rounds, x.slowest, x.kept_waiting_seconds,
           x.stalls, x.deferred, x.refusals, x.failed, x.counts_stale, load);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, process_metrics& x) {
  auto load = caf::meta::load_callback([&]() -> caf::error {
    if (!detail::is_seconds(x.kept_waiting_seconds))
      return caf::sec::invalid_argument;
    return caf::none;
  });
  return f(caf::meta::type_name("varsync::process_metrics"), x.rank,
           x.slowest, x.kept_waiting_seconds, x.stalls, load);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, strategy_metrics& x) {
  auto load = caf::meta::load_callback([&]() -> caf::error {
    for (double s : {x.uptime_seconds, x.collective_seconds,
                     x.waiting_for_processes_seconds,
                     x.stall_threshold_seconds})
      if (!detail::is_seconds(s))
        return caf::sec::invalid_argument;
    return caf::none;
  });
  return f(caf::meta::type_name("varsync::strategy_metrics"), x.process_rank,
           x.processes, x.uptime_seconds, x.steps, x.collectives,
           x.collective_seconds, x.bytes_moved,
           x.waiting_for_processes_seconds, x.in_flight, x.queued_operations,
           x.queued_bytes, x.outstanding_calls, x.deferred_on_replicas,
           x.completed, x.refusals, x.deadlines_hit, x.errors,
           x.local_adds_dropped, x.writes_sent, x.write_groups,
           x.services_inline_bytes, x.services_data_plane_bytes,
           x.services_group_rounds, x.services_grouped_updates,
           x.stall_threshold_seconds, x.replicas,
           x.process_rounds, x.variables, load);
}

} // namespace varsync
