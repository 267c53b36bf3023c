#pragma once
// What `run` executes on every replica: a replica_step (a function of the
// replica's context), what a replica does when one throws, and coroutine
// steps.
//
// Coroutine steps (X1-X5): a replica step that returns step_task<R> may suspend
// at collectives inside the step (co_await ctx.all_reduce(...)). A suspended
// step holds no scheduler thread: its replica actor returns to its mailbox
// and resumes the step when the coordinator has combined every replica's
// contribution.
//
//   s.run([&](replica_context& ctx) -> step_task<> {
//     tensor g = ...;
//     tensor sum = co_await ctx.all_reduce(reduce_op::sum, g);
//     ctx.assign_sub(w, scaled(sum));
//   });
//
// A step_task is lazy (it starts when awaited or when its replica starts
// it) and may await another step_task, so helpers that reach collectives
// are coroutines too. Only step_tasks and replica_context's collectives can
// be awaited inside one (anything else would suspend the step with nothing
// to resume it).

#include <coroutine>
#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <type_traits>
#include <utility>

#include <caf/allowed_unsafe_message_type.hpp>

namespace varsync {

/// What a replica does when a user's replica step throws.

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

namespace varsync {

template <class R = void>
class step_task;

namespace detail {

/// Base of the awaitables a step may co_await (replica_context's
/// collectives).
struct step_awaitable {};

template <class T>
struct is_step_task : std::false_type {};

template <class R>
struct is_step_task<step_task<R>> : std::true_type {};

struct step_promise_base {
  std::coroutine_handle<> continuation;
  std::exception_ptr error;

  std::suspend_always initial_suspend() noexcept { return {}; }

  struct final_awaiter {
    bool await_ready() noexcept { return false; }
    template <class P>
    std::coroutine_handle<> await_suspend(std::coroutine_handle<P> h) noexcept {
      // Back to the awaiting task, or to whoever resumed this one (the
      // replica) when it is the step's root.
      auto next = h.promise().continuation;
      return next ? next : std::noop_coroutine();
    }
    void await_resume() noexcept {}
  };

  final_awaiter final_suspend() noexcept { return {}; }

  void unhandled_exception() noexcept { error = std::current_exception(); }

  template <class A>
    requires std::is_base_of_v<step_awaitable, std::remove_cvref_t<A>>
             || is_step_task<std::remove_cvref_t<A>>::value
  A&& await_transform(A&& a) noexcept {
    return std::forward<A>(a);
  }

  template <class A>
  A&& await_transform(A&& a) noexcept {
    static_assert(sizeof(A) == 0,
                  "a step_task awaits only step_tasks and replica_context's "
                  "collectives (all_reduce, all_gather, broadcast): anything "
                  "else would suspend the step with nothing to resume it");
    return std::forward<A>(a);
  }
};

template <class R>
struct step_promise : step_promise_base {
  std::optional<R> value;
  step_task<R> get_return_object() noexcept;
  template <class U>
  void return_value(U&& v) {
    value.emplace(std::forward<U>(v));
  }
};

template <>
struct step_promise<void> : step_promise_base {
  step_task<void> get_return_object() noexcept;
  void return_void() noexcept {}
};

} // namespace detail

/// The return type of a coroutine step or of a coroutine it awaits.
template <class R>
class [[nodiscard]] step_task {
public:
  using promise_type = detail::step_promise<R>;
  using handle_type = std::coroutine_handle<promise_type>;

  step_task() = default;
  explicit step_task(handle_type h) noexcept : h_(h) {}
  step_task(step_task&& other) noexcept : h_(std::exchange(other.h_, {})) {}
  step_task& operator=(step_task&& other) noexcept {
    if (this != &other) {
      if (h_)
        h_.destroy();
      h_ = std::exchange(other.h_, {});
    }
    return *this;
  }
  step_task(const step_task&) = delete;
  step_task& operator=(const step_task&) = delete;
  /// Destroying a task that has not finished destroys its frame (and the
  /// frames it awaits): how a replica abandons a failed step.
  ~step_task() {
    if (h_)
      h_.destroy();
  }

  // -- awaiting a task from another one ---------------------------------------

  bool await_ready() const noexcept { return false; }
  std::coroutine_handle<> await_suspend(std::coroutine_handle<> caller) noexcept {
    h_.promise().continuation = caller;
    return h_;
  }
  R await_resume() {
    auto& p = h_.promise();
    if (p.error)
      std::rethrow_exception(p.error);
    if constexpr (!std::is_void_v<R>)
      return std::move(*p.value);
  }

  // -- driving the root task (the replica) ------------------------------------

  bool valid() const noexcept { return static_cast<bool>(h_); }
  bool done() const noexcept { return !h_ || h_.done(); }
  /// Runs the task until it suspends at a collective or ends.
  void resume() { h_.resume(); }
  /// The exception the task ended with, or null.
  std::exception_ptr error() const noexcept {
    return h_ ? h_.promise().error : nullptr;
  }

private:
  handle_type h_;
};

namespace detail {

template <class R>
step_task<R> step_promise<R>::get_return_object() noexcept {
  return step_task<R>{std::coroutine_handle<step_promise<R>>::from_promise(*this)};
}

inline step_task<void> step_promise<void>::get_return_object() noexcept {
  return step_task<void>{
    std::coroutine_handle<step_promise<void>>::from_promise(*this)};
}

} // namespace detail

} // namespace varsync
