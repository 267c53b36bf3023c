#pragma once
// What a replica does when a user's replica step throws.

#include <cstdint>

namespace varsync {

enum class on_step_exception : uint8_t {
  /// Fail-stop (default): the step fails with replica_failed and the replica
  /// actor exits with that error. Its local ON_READ/NONE updates made before
  /// the throw cannot diverge silently from the others: the strategy reports
  /// the replica as failed (stats().failures), later operations that need it
  /// fail with replica_failed, and survivor_values reads the others.
  stop_replica,
  /// The step fails with replica_failed and the replica keeps serving (as
  /// TensorFlow's strategy.run does). Local updates made before the throw
  /// stay applied on that replica only.
  fail_step,
};

} // namespace varsync
