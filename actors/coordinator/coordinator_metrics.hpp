#pragma once
// What the coordinator counts for strategy::metrics() (M1-M4): plain
// counters on the coordinator's thread, one clock read per collective and
// per step reply; the snapshot reads the other parts through their
// accessors (coordinator_metrics.cpp).

#include <chrono>
#include <cstdint>
#include <optional>
#include <vector>

#include <caf/error.hpp>
#include <caf/expected.hpp>
#include <caf/timespan.hpp>

#include "messages/replica_usage.hpp"
#include "varsync/device_id.hpp"

namespace varsync {

class admission;
class collective_runner;
class ordering;
class replica_set;
class step_driver;
class variable_registry;
class write_batcher;
struct collective_plan;
struct process_layout;
struct recorded_update;
struct strategy_metrics;

/// Per variable, kept in the coordinator's entry.
struct variable_usage {
  uint64_t cross_reads = 0;
  uint64_t cross_updates = 0;
  uint64_t steps_updated = 0;
  uint64_t collectives = 0;
  uint64_t bytes_moved = 0;
  caf::timespan collective_time{0};
  caf::timespan waiting{0};
  /// The last step counted in steps_updated (a step may update a variable
  /// more than once).
  uint64_t last_step = 0;
};

/// When each replica answered a round.
struct reply_times {
  using clock = std::chrono::steady_clock;
  std::vector<clock::time_point> at;
  explicit reply_times(size_t replicas) : at(replicas) {}
};

/// The parts a snapshot reads.
struct metrics_sources {
  const admission& admitted;
  const write_batcher& writes;
  const step_driver& steps;
  const collective_runner& collectives;
  const ordering& order;
  const replica_set& replicas;
  const std::optional<process_layout>& processes;
  uint64_t local_adds_dropped = 0;
};

class coordinator_record {
public:
  using clock = std::chrono::steady_clock;

  /// Counts per variable are kept in `variables`' entries.
  explicit coordinator_record(variable_registry& variables)
    : variables_(variables) {}

  /// `replicas` here, the first's id in the strategy; timing on or off
  /// (counts stay); the stall warning's threshold (0: off).
  void configure(size_t replicas, int first_replica,
                 caf::timespan stall_threshold, bool enabled);

  /// Off: no clock reads, no step timing (counts stay).
  bool enabled() const { return enabled_; }
  caf::timespan stall_threshold() const { return stall_threshold_; }

  /// An operation answered its caller.
  template <class T>
  void outcome(const caf::expected<T>& r) {
    if (r)
      ++completed_;
    else
      failed(r.error());
  }
  void refused() { ++refusals_; }
  /// A blocking caller gave up before the operation started.
  void deadline_missed() { ++deadlines_; }
  /// A cross-replica read or update of a variable started (`u`: its counts;
  /// not counted when `rerun`: a read running again after the writes it
  /// waited for).
  static void cross_read(variable_usage& u, bool rerun) {
    u.cross_reads += rerun ? 0 : 1;
  }
  static void cross_update(variable_usage& u, bool rerun) {
    u.cross_updates += rerun ? 0 : 1;
  }

  /// A round of step replies: adds to `waited` how long the first to
  /// answer waited for the last, and warns about a replica that kept the
  /// others waiting longer than the stall threshold.
  void step_round(const reply_times& t, const std::vector<device_id>& devices,
                  uint64_t seq, caf::timespan& waited);
  /// Step `seq` applies ON_WRITE updates `ys` (each variable counted once).
  void step_updates(const std::vector<recorded_update>& ys, uint64_t seq,
                    caf::timespan waited);
  /// `plan`, started at `started` (epoch: not timed), completed: its time
  /// and the bytes of each item.
  void collective_completed(const collective_plan& plan,
                            clock::time_point started);

  /// The snapshot: the coordinator's counts and its variables', then each
  /// replica's; `got` holds the replicas' counts that answered (the others'
  /// last ones are reported, marked stale).
  strategy_metrics snapshot(const metrics_sources& parts,
                            std::vector<std::optional<replica_usage>>& got);

  struct replica_timing {
    uint64_t rounds = 0;
    uint64_t slowest = 0;
    uint64_t stalls = 0;
    caf::timespan kept_waiting{0};
    /// Warnings are rate-limited: one per replica per warning interval.
    clock::time_point last_warning{};
    uint64_t unwarned_stalls = 0;
  };

  static constexpr std::chrono::seconds warning_interval{10};

private:
  void failed(const caf::error& err);
  void add_replicas(strategy_metrics& m, const replica_set& replicas,
                    std::vector<std::optional<replica_usage>>& got);

  variable_registry& variables_;
  bool enabled_ = true;
  caf::timespan stall_threshold_{0};
  int first_replica_ = 0;
  clock::time_point created_ = clock::now();
  caf::timespan collective_time_{0};
  uint64_t bytes_moved_ = 0;
  uint64_t completed_ = 0;
  uint64_t refusals_ = 0;
  uint64_t deadlines_ = 0;
  uint64_t errors_ = 0;
  std::vector<replica_timing> replicas_;
  /// Each replica's counts at the last snapshot it answered.
  std::vector<replica_usage> last_usage_;
};

} // namespace varsync
