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
};

using client_call_ptr = std::shared_ptr<client_call>;

} // namespace varsync

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(varsync::client_call_ptr)
