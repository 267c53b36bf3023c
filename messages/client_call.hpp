#pragma once
// Requests from callers that are not actors (the async and blocking APIs):
// a closure the coordinator runs on its own thread. Its completion callback
// replaces a reply message, so no scoped_actor is spawned per call.

#include <cstddef>
#include <memory>

#include <caf/allowed_unsafe_message_type.hpp>

namespace varsync {

class coordinator_state;

class client_call {
public:
  virtual ~client_call() = default;
  virtual void invoke(coordinator_state& coordinator) = 0;
  /// The size of the call's tensor arguments, counted while it waits for
  /// admission (the queued bytes of the metrics).
  size_t bytes = 0;
};

using client_call_ptr = std::shared_ptr<client_call>;

} // namespace varsync

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(varsync::client_call_ptr)
