#pragma once
// Internal to the façade's sources: how a call reaches the coordinator
// (strategy_core::submit, a client_call admitted by the coordinator) and how a
// blocking call waits for the outcome of the async call it starts
// (strategy_core::await).

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include <caf/send.hpp>

#include "actors/coordinator_state.hpp"
#include "api/strategy_core.hpp"
#include "core/wake_flag.hpp"
#include "api/strategy_helpers.hpp"
#include "varsync/error.hpp"

namespace varsync::detail {

// A client call is started by the coordinator or abandoned by a blocking
// caller whose deadline passed, whichever comes first.
enum : int { call_pending, call_started, call_abandoned };

/// The state of the call that await() is starting on this thread
/// (api/strategy_core.cpp).
extern thread_local std::shared_ptr<std::atomic<int>>* starting_call;

// Calls `fn` once: with the outcome, or with shut_down when the last copy
// is dropped unanswered (the coordinator stopped with the operation in
// flight), so that no caller waits for an answer that cannot come.
template <class T>
struct reply_once {
  reply_fn<T> fn;
  void operator()(caf::expected<T> r) {
    auto f = std::move(fn);
    fn = nullptr;
    if (f)
      f(std::move(r));
  }
  ~reply_once() {
    if (fn)
      fn(make_error(errc::shut_down,
                    "the strategy shut down before the operation completed"));
  }
};

template <class T>
class call_impl final : public client_call {
public:
  using op_type = std::function<void(coordinator_state&, reply_fn<T>)>;

  call_impl(op_type op, reply_fn<T> done)
    : op_(std::move(op)), done_(std::move(done)) {
  }

  ~call_impl() override {
    if (done_) // never ran: the coordinator is gone
      done_(make_error(errc::shut_down, "the strategy has shut down"));
  }

  // Admitted like every request (coordinator_state::admit); the slot is
  // released when the operation completes.
  void invoke(coordinator_state& coordinator) override {
    int expected = call_pending;
    if (!state_->compare_exchange_strong(expected, call_started)) {
      done_ = nullptr; // the caller has its answer: timeout, nothing changed
      coordinator.release_slot();
      coordinator.note_abandoned();
      return;
    }
    auto once = std::make_shared<reply_once<T>>();
    once->fn = std::move(done_);
    done_ = nullptr;
    // The deadline counts from the request, not from when the coordinator
    // got to it.
    coordinator.run_requested_at(submitted_, [&] {
      op_(coordinator,
          coordinator.releasing<T>(
            [once](caf::expected<T> r) { (*once)(std::move(r)); }));
    });
  }

private:
  op_type op_;
  reply_fn<T> done_;
  std::shared_ptr<std::atomic<int>> state_
    = starting_call ? *starting_call
                    : std::make_shared<std::atomic<int>>(call_pending);
  std::chrono::steady_clock::time_point submitted_
    = std::chrono::steady_clock::now();
};

template <class T>
void strategy_core::submit(
  std::function<void(coordinator_state&, reply_fn<T>)> op, reply_fn<T> done,
  size_t bytes) {
  if (stopped_.load()) {
    done(shut_down_error());
    return;
  }
  // Count first, then check: concurrent submitters never pass the bounds
  // together. A single call larger than the byte bound still runs when
  // nothing else is outstanding.
  auto counts = outstanding_;
  auto ops = counts->operations.fetch_add(1) + 1;
  auto queued = counts->bytes.fetch_add(bytes) + bytes;
  if (ops > max_queued_operations_
      || (queued > max_queued_bytes_ && queued != bytes)) {
    counts->operations.fetch_sub(1);
    counts->bytes.fetch_sub(bytes);
    counts->refused.fetch_add(1);
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
  // The slot is given back when the call is answered (before `done` runs, so
  // that `done` may submit the next call), or when the call is dropped
  // unanswered (a blocking caller abandoned it).
  struct slot {
    std::shared_ptr<outstanding> counts;
    size_t bytes;
    std::atomic<bool> held{true};
    void release() {
      if (held.exchange(false)) {
        counts->operations.fetch_sub(1);
        counts->bytes.fetch_sub(bytes);
      }
    }
    ~slot() { release(); }
  };
  auto held = std::make_shared<slot>();
  held->counts = std::move(counts);
  held->bytes = bytes;
  reply_fn<T> counted = [held, done = std::move(done)](caf::expected<T> r) {
    held->release();
    done(std::move(r));
  };
  client_call_ptr call = std::make_shared<call_impl<T>>(std::move(op),
                                                        std::move(counted));
  call->bytes = bytes;
  caf::anon_send(coordinator_, client_atom::value, std::move(call));
}

// A call the coordinator runs as it arrives (client_now_atom): no slot, no
// admission queue.
template <class T>
class now_call final : public client_call {
public:
  using op_type = std::function<void(coordinator_state&, reply_fn<T>)>;

  now_call(op_type op, reply_fn<T> done)
    : op_(std::move(op)), done_(std::move(done)) {
  }

  ~now_call() override {
    if (done_)
      done_(make_error(errc::shut_down, "the strategy has shut down"));
  }

  void invoke(coordinator_state& coordinator) override {
    auto once = std::make_shared<reply_once<T>>();
    once->fn = std::move(done_);
    done_ = nullptr;
    op_(coordinator, [once](caf::expected<T> r) { (*once)(std::move(r)); });
  }

private:
  op_type op_;
  reply_fn<T> done_;
};

template <class T>
void strategy_core::submit_now(
  std::function<void(coordinator_state&, reply_fn<T>)> op, reply_fn<T> done) {
  if (stopped_.load()) {
    done(shut_down_error());
    return;
  }
  client_call_ptr call = std::make_shared<now_call<T>>(std::move(op),
                                                       std::move(done));
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
