#pragma once
// A replica step travels to every replica as a shared, type-erased function;
// each replica answers with the ON_WRITE updates it recorded, in issue order
// (varsync/internal/step_report.hpp).

#include <cstdint>
#include <memory>

#include <caf/allowed_unsafe_message_type.hpp>

#include "varsync/internal/step_report.hpp"

// -- step exception policy ---------------------------------------------------
// What a replica does when a user's replica step throws.
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

namespace varsync {

class replica_context;

/// The user function of `run`, executed once on every replica. `run` is
/// called on replica r's actor with replica r's context.
class replica_step {
public:
  virtual ~replica_step() = default;
  virtual void run(replica_context& ctx) = 0;
};

using replica_step_ptr = std::shared_ptr<replica_step>;

} // namespace varsync

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(varsync::replica_step_ptr)
