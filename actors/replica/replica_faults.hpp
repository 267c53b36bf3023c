#pragma once
// Test support: the faults injected into one replica (varsync/replica_fault.hpp).
// The replica's operations pass through one hook, on_operations; no other
// part of the replica knows about faults.

#include <chrono>
#include <cstdint>
#include <utility>
#include <vector>

#include <caf/error.hpp>

#include "varsync/device_id.hpp"
#include "varsync/ext/replica_fault.hpp"

namespace varsync::replica_internal {

class replica_faults {
public:
  enum class outcome { none, delay, failed };

  replica_faults(std::vector<replica_fault> faults, int rank, device_id dev)
    : faults_(std::move(faults)), rank_(rank), device_(dev) {
  }

  /// Counts `operations` (a batch of writes: one per write) and says what
  /// the injected faults make of them. Without faults: none, and nothing
  /// is counted.
  outcome on_operations(uint64_t operations = 1) {
    if (faults_.empty())
      return outcome::none;
    return count(operations);
  }

  /// Why the replica exits once on_operations said `failed`.
  caf::error failure() const { return failure_; }

  /// The reply to an operation refused because the replica has failed.
  caf::error failed_error() const;

  /// How late a delayed replica runs its next deferred operation.
  std::chrono::milliseconds delay() const;

  /// A delayed replica runs one deferred operation per delay: true if the
  /// caller must schedule that resume (none is pending yet).
  bool schedule_resume() { return !std::exchange(resume_pending_, true); }

  /// The scheduled resume arrived.
  void resumed() { resume_pending_ = false; }

  /// A resume is scheduled: it, not the end of a collective, releases the
  /// deferred operations.
  bool resume_pending() const { return resume_pending_; }

private:
  outcome count(uint64_t operations);

  std::vector<replica_fault> faults_;
  int rank_;
  device_id device_;
  uint64_t operations_ = 0;
  bool resume_pending_ = false;
  caf::error failure_;
};

} // namespace varsync::replica_internal
