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

/// One call's place among its caller's outstanding calls: given back once,
/// by give_back() or when the slot goes away, whichever comes first.
/// Move-only, so the place moves from the call to its answer.
class outstanding_slot {
public:
  outstanding_slot() = default;
  outstanding_slot(std::shared_ptr<outstanding_calls> calls, size_t bytes)
    : calls_(std::move(calls)), bytes_(bytes) {}
  outstanding_slot(outstanding_slot&& other) noexcept
    : calls_(std::move(other.calls_)), bytes_(other.bytes_) {}
  outstanding_slot& operator=(outstanding_slot&& other) noexcept {
    if (this != &other) {
      give_back();
      calls_ = std::move(other.calls_);
      bytes_ = other.bytes_;
    }
    return *this;
  }
  ~outstanding_slot() { give_back(); }

  void give_back() {
    if (calls_) {
      calls_->release(bytes_);
      calls_.reset();
    }
  }

private:
  std::shared_ptr<outstanding_calls> calls_;
  size_t bytes_ = 0;
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
  /// The call's place among its caller's outstanding calls (empty: it is
  /// not counted). It moves to the call's answer when the call starts,
  /// which gives it back before the caller's callback runs (so that the
  /// callback may submit the next call); a call dropped before it started
  /// gives it back as it goes (the destructor, before the completion fails).
  outstanding_slot counted;
};

using client_call_ptr = std::shared_ptr<client_call>;

} // namespace varsync

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(varsync::client_call_ptr)
