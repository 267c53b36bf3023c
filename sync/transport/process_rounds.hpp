#pragma once
// Who keeps the processes of a strategy waiting (M4): every agreement round
// of the processes carries, from each one, how long it took since its
// previous round ended. The previous round ended at nearly the same moment
// everywhere, so the process that took longest arrived last, and the gap to
// the second-longest is how long it alone kept the others waiting. Written
// by the thread that runs the group's collectives, read by metrics
// snapshots (a mutex; a few per round).

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "varsync/ext/metrics.hpp"

namespace varsync {

class process_rounds {
public:
  using clock = std::chrono::steady_clock;

  /// Set once when the strategy starts, right after the processes joined
  /// (0: no stall warnings).
  void configure(std::chrono::nanoseconds stall_threshold);

  /// This process's time since its previous round ended, in microseconds
  /// (saturating); the first round counts from the group's creation.
  uint32_t busy_micros() const;

  /// The round's figures, one per rank in rank order, after it completed
  /// (`waited`: how long this process waited in it); `what` names the
  /// operation for the stall warning. The next round counts from now.
  void record(const std::vector<uint32_t>& busy, int my_rank,
              std::chrono::nanoseconds waited, const std::string& what);

  /// Per rank (empty before the first round) and this process's total wait.
  std::vector<process_metrics> snapshot() const;
  double waited_seconds() const;

private:
  struct peer {
    uint64_t slowest = 0;
    uint64_t stalls = 0;
    std::chrono::nanoseconds kept_waiting{0};
    clock::time_point last_warning{};
  };
  mutable std::mutex mutex_;
  std::chrono::nanoseconds threshold_{0};
  clock::time_point round_ended_ = clock::now();
  std::chrono::nanoseconds waited_{0};
  std::vector<peer> peers_;
};

} // namespace varsync
