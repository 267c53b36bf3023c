#pragma once
// Internal to the façade's sources: how a call reaches the coordinator
// (strategy_core::submit: the operation as a value, a client_call admitted by
// the coordinator) and how a blocking call waits for the outcome of the async
// call it starts (strategy_core::await).

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include <caf/send.hpp>

#include "api/strategy_core.hpp"
#include "core/wake_flag.hpp"
#include "api/strategy_helpers.hpp"
#include "varsync/error.hpp"

namespace varsync::detail {

/// The state of the call that await() is starting on this thread
/// (api/strategy_core.cpp).
extern thread_local std::shared_ptr<std::atomic<int>>* starting_call;

template <class Op>
void strategy_core::submit(Op op, caf::timespan timeout,
                           reply_fn<result_of<Op>> done) {
  if (stopped_.load()) {
    done(shut_down_error());
    return;
  }
  operation value{std::move(op)};
  const size_t bytes = tensor_bytes(value);
  // Count first, then check: concurrent submitters never pass the bounds
  // together. A single call larger than the byte bound still runs when
  // nothing else is outstanding.
  auto ops = outstanding_->operations.fetch_add(1) + 1;
  auto queued = outstanding_->bytes.fetch_add(bytes) + bytes;
  outstanding_slot slot{outstanding_, bytes};
  if (ops > max_queued_operations_
      || (queued > max_queued_bytes_ && queued != bytes)) {
    slot.give_back();
    outstanding_->refused.fetch_add(1);
    done(make_error(
      errc::overloaded,
      ops > max_queued_operations_
        ? "refused: " + std::to_string(max_queued_operations_)
            + " calls of this strategy are outstanding "
              "(max_queued_operations); nothing was changed, retry later"
        : "refused: the calls outstanding hold more than "
            + std::to_string(max_queued_bytes_)
            + " bytes of tensors (max_queued_bytes); nothing was changed, "
              "retry later"));
    return;
  }
  auto call = std::make_shared<client_call>(std::move(value), timeout,
                                            make_completion(std::move(done)));
  if (starting_call != nullptr)
    call->state = *starting_call;
  call->bytes = bytes;
  call->counted = std::move(slot);
  caf::anon_send(coordinator_, client_atom::value, std::move(call));
}

template <class Op>
void strategy_core::submit_now(Op op, caf::timespan timeout,
                               reply_fn<result_of<Op>> done) {
  if (stopped_.load()) {
    done(shut_down_error());
    return;
  }
  auto call = std::make_shared<client_call>(operation{std::move(op)}, timeout,
                                            make_completion(std::move(done)));
  caf::anon_send(coordinator_, client_now_atom::value, std::move(call));
}

// Where a blocking caller waits for its outcome: asleep on a wake_flag
// (core/wake_flag.hpp), which the coordinator's answer sets.
template <class T>
class blocking_slot {
public:
  void set(caf::expected<T> value) {
    value_.emplace(std::move(value));
    ready_.set();
  }

  bool wait_until(std::chrono::steady_clock::time_point deadline) {
    return ready_.wait_until(deadline);
  }

  void wait() { ready_.wait(); }

  caf::expected<T> take() { return std::move(*value_); }

private:
  wake_flag ready_;
  std::optional<caf::expected<T>> value_;
};

template <class T, class Start>
caf::expected<T> strategy_core::await(std::chrono::milliseconds timeout,
                                      Start&& start) {
  if (auto err = check_may_block())
    return err;
  auto slot = std::make_shared<blocking_slot<T>>();
  // The client call that start() submits shares this state, so that this
  // caller can abandon it if the coordinator has not started it in time.
  auto state = std::make_shared<std::atomic<int>>(call_pending);
  starting_call = &state;
  start(reply_fn<T>{
    [slot](caf::expected<T> result) { slot->set(std::move(result)); }});
  starting_call = nullptr;
  if (timeout >= api_helpers::no_deadline_from) {
    slot->wait();
    return slot->take();
  }
  // The coordinator enforces the deadline towards the replicas; the grace
  // period covers the hop back.
  auto deadline = std::chrono::steady_clock::now() + timeout
                  + std::chrono::milliseconds(100);
  if (!slot->wait_until(deadline)) {
    int expected = call_pending;
    if (state->compare_exchange_strong(expected, call_abandoned))
      return make_error(errc::timeout,
                        "the coordinator did not start the operation within "
                          + std::to_string(timeout.count())
                          + " ms; it never will, nothing was changed");
    // Started: the coordinator answers by its own deadline (timeout before
    // the commit point, committed_late after it) or when it stops.
    slot->wait();
  }
  return slot->take();
}

} // namespace varsync::detail
