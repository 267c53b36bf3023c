#pragma once
// What the coordinator counts for strategy::metrics() (M1-M4): plain
// counters on the coordinator's thread, one clock read per collective and
// per step reply. The snapshot is assembled in coordinator_metrics.cpp.

#include <chrono>
#include <cstdint>
#include <vector>

#include <caf/error.hpp>
#include <caf/timespan.hpp>

#include "varsync/device_id.hpp"

namespace varsync {

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

class coordinator_record {
public:
  using clock = std::chrono::steady_clock;

  coordinator_record(size_t replicas, caf::timespan stall_threshold,
                     bool enabled)
    : enabled_(enabled), stall_threshold_(stall_threshold),
      replicas_(replicas) {}

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

  /// A round of step replies (`first_replica`: the global id of replica
  /// 0 here): returns how long the first to answer waited for the last,
  /// and warns about a replica that kept the others waiting longer than
  /// the stall threshold.
  caf::timespan step_round(const reply_times& t,
                           const std::vector<device_id>& devices,
                           int first_replica, uint64_t seq);

  struct replica_timing {
    uint64_t rounds = 0;
    uint64_t slowest = 0;
    uint64_t stalls = 0;
    caf::timespan kept_waiting{0};
    /// Warnings are rate-limited: one per replica per warning interval.
    clock::time_point last_warning{};
    uint64_t unwarned_stalls = 0;
  };

  clock::time_point created = clock::now();
  caf::timespan collective_time{0};
  uint64_t bytes_moved = 0;
  uint64_t completed() const { return completed_; }
  uint64_t refusals() const { return refusals_; }
  uint64_t deadlines() const { return deadlines_; }
  uint64_t errors() const { return errors_; }
  const std::vector<replica_timing>& replicas() const { return replicas_; }

  static constexpr std::chrono::seconds warning_interval{10};

private:
  void failed(const caf::error& err);

  bool enabled_;
  caf::timespan stall_threshold_;
  uint64_t completed_ = 0;
  uint64_t refusals_ = 0;
  uint64_t deadlines_ = 0;
  uint64_t errors_ = 0;
  std::vector<replica_timing> replicas_;
};

} // namespace varsync
