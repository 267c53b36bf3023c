#pragma once
// Fault injection for tests (the library's own and its users' actor-level
// tests): make replica r fail at its k-th operation, or delay its operations.

#include <chrono>
#include <cstdint>
#include <string>

namespace varsync {

struct replica_fault {
  enum class kind : uint8_t {
    /// The replica actor exits (as if its device failed) when it receives its
    /// `at_operation`-th operation (1-based).
    fail,
    /// From its `at_operation`-th operation on, the replica answers each
    /// operation `delay` late, without blocking a scheduler thread.
    delay,
  };

  int replica = 0;
  kind what = kind::fail;
  uint64_t at_operation = 1;
  std::chrono::milliseconds delay{0};
  /// Reported as the reason of the failure.
  std::string reason = "injected fault";
};

inline replica_fault fail_replica_at(int replica, uint64_t operation,
                                     std::string reason = "injected fault") {
  return {replica, replica_fault::kind::fail, operation,
          std::chrono::milliseconds{0}, std::move(reason)};
}

inline replica_fault delay_replica(int replica, std::chrono::milliseconds d,
                                   uint64_t from_operation = 1) {
  return {replica, replica_fault::kind::delay, from_operation, d,
          "injected delay"};
}

} // namespace varsync
