#pragma once
// A request from a caller that is not an actor (the async and blocking APIs,
// checkpoints): the operation as a value and its completion, which replaces
// a reply message, so that no scoped_actor is spawned per call. It never
// leaves the process.

#include <atomic>
#include <chrono>
#include <cstddef>
#include <memory>

#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/timespan.hpp>

#include "messages/completion.hpp"
#include "messages/operation.hpp"

namespace varsync {

// A client call is started by the coordinator or abandoned by a blocking
// caller whose deadline passed, whichever comes first.
enum : int { call_pending, call_started, call_abandoned };

/// A caller's calls sent and not yet answered, and the bytes of their tensor
/// arguments (V3's bounds before the coordinator's mailbox), shared by the
/// API's handle and its calls: a call may outlive the handle.
struct outstanding_calls {
  std::atomic<size_t> operations{0};
  std::atomic<size_t> bytes{0};
  /// Calls refused as overloaded (metrics).
  std::atomic<uint64_t> refused{0};

  /// Gives back what a call of `call_bytes` held.
  void release(size_t call_bytes) {
    operations.fetch_sub(1);
    bytes.fetch_sub(call_bytes);
  }
};

struct client_call {
  client_call(operation&& o, caf::timespan t, completion&& d)
    : op(std::move(o)), timeout(t), done(std::move(d)) {
  }
  client_call(const client_call&) = delete;
  client_call& operator=(const client_call&) = delete;
  /// Never started: the coordinator is gone.
  ~client_call();

  operation op;
  /// The caller's deadline, counted from `submitted`.
  caf::timespan timeout;
  /// Taken (take_completion) when the call starts.
  completion done;
  completion take_completion() {
    auto out = std::move(done);
    done = reply_fn<ok_atom>{};
    return out;
  }
  /// Shared with a blocking caller, who may abandon the call before it
  /// starts; null for an async call, which nobody abandons.
  std::shared_ptr<std::atomic<int>> state;
  std::chrono::steady_clock::time_point submitted
    = std::chrono::steady_clock::now();
  /// The size of the call's tensor arguments, counted while it waits for
  /// admission (the queued bytes of the metrics).
  size_t bytes = 0;
  /// Where the call is counted as outstanding (null: it is not). The count
  /// moves to the call's answer when it starts, which gives it back before
  /// the caller's callback runs (so that the callback may submit the next
  /// call); a call dropped before it started gives it back itself.
  std::shared_ptr<outstanding_calls> counted;
  void give_back() {
    if (counted) {
      counted->release(bytes);
      counted.reset();
    }
  }
};

using client_call_ptr = std::shared_ptr<client_call>;

} // namespace varsync

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(varsync::client_call_ptr)
