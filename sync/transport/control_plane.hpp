#pragma once
// The control plane of the processes of a strategy: membership beyond the
// join (who left, in order or not), services mode's sequencer, and the
// health that fails every later collective once a process is lost. The
// data moves elsewhere (sync/transport/data_transport.hpp). The Gloo joiner
// implements it over CAF's network layer (actors/cluster); a group without one
// (a test's, a transport alone) gets the one below, which does nothing.
// Thread-safe, non-blocking unless said otherwise.

#include <chrono>
#include <functional>

#include <caf/error.hpp>

#include "messages/sequenced_operation.hpp"

namespace varsync {

/// Services mode: where the operations that process 0 ordered arrive, in
/// their order, on a thread of the transport (deliver must not block).
struct sequence_receiver {
  std::function<void(sequenced_operation)> deliver;
  /// The sequencer cannot be reached: nothing more arrives.
  std::function<void(caf::error)> failed;
};

class control_plane {
public:
  virtual ~control_plane() = default;

  // Services mode (joined with cluster_mode::services): process 0 orders
  // the operations that any process submits. A group joined in training
  // mode has no sequencer: both do nothing.

  /// Operations delivered before a receiver is attached wait for it.
  virtual void attach_sequencer(sequence_receiver) {}
  /// Sends `op` to process 0's sequencer (dropped if it is unreachable:
  /// the receiver's failed() has been or will be called).
  virtual void submit(sequenced_operation) {}

  /// In process 0: waits until every other process has left (its link to
  /// the sequencer is gone), at most `limit`; true if they all did. The
  /// others' last operations need process 0 to order them. Elsewhere:
  /// true at once. Blocking.
  virtual bool await_others_left(std::chrono::milliseconds) { return true; }
  /// This process leaves in order (its strategy shuts down): the others
  /// hear it before its connections close, within a bound, so that none
  /// takes the closing for a crash. Idempotent; blocking.
  virtual void leave() {}

  /// Health: why this process lost the strategy (another process left, or
  /// process 0 is unreachable); none while it has not.
  virtual caf::error failure() const { return {}; }
};

} // namespace varsync
