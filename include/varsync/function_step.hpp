#pragma once
// Replica steps made from a function, shared by the three entry points: the
// blocking strategy::run(fn), async_strategy::run(fn, done) and actors that
// send run_atom to a coordinator (make_step).

#include <concepts>
#include <memory>
#include <optional>
#include <stdexcept>
#include <type_traits>
#include <utility>
#include <vector>

#include "varsync/distributed_values.hpp"
#include "varsync/replica_context.hpp"
#include "varsync/step_task.hpp"

namespace varsync {

/// A step that runs fn(ctx) on every replica and keeps no result.
template <class F>
class void_step final : public replica_step {
public:
  explicit void_step(F fn) : fn_(std::move(fn)) {}
  void run(replica_context& ctx) override { fn_(ctx); }

private:
  F fn_;
};

/// Where a value-returning step leaves its per-replica results: replica r
/// writes slot r only, and take() reads them once the run has been
/// answered ok (the reply orders the writes before it).
template <class R>
class step_results {
public:
  /// Slots for replicas first .. first + num_replicas - 1 (a strategy over
  /// several processes keeps the results of this process's replicas).
  explicit step_results(int num_replicas, int first = 0)
    : results_(static_cast<size_t>(num_replicas)), first_(first) {}
  virtual ~step_results() = default;

  /// The results in replica order. Only after the run succeeded: throws
  /// std::logic_error if a replica left no result (the run failed).
  per_replica<R> take() {
    std::vector<R> out;
    out.reserve(results_.size());
    for (auto& r : results_) {
      if (!r)
        throw std::logic_error("step_results::take: a replica has no result "
                               "(take only after the run replied ok)");
      out.push_back(std::move(*r));
      r.reset();
    }
    return per_replica<R>{std::move(out)};
  }

protected:
  void store(int replica, R value) {
    results_.at(static_cast<size_t>(replica - first_)).emplace(std::move(value));
  }

private:
  std::vector<std::optional<R>> results_;
  int first_ = 0;
};

/// A step that runs fn(ctx) on every replica and keeps replica r's result.
template <class R, class F>
class value_step final : public replica_step, public step_results<R> {
public:
  value_step(F fn, int num_replicas, int first = 0)
    : step_results<R>(num_replicas, first), fn_(std::move(fn)) {}
  void run(replica_context& ctx) override {
    this->store(ctx.replica_id(), fn_(ctx));
  }

private:
  F fn_;
};

/// A coroutine step (X1-X5): fn(ctx) returns step_task<R>, which may suspend
/// at collectives inside the step; R is kept per replica as value_step does.
namespace detail {

struct no_step_results {
  no_step_results(int, int) {}
};

template <class R>
using step_results_of
  = std::conditional_t<std::is_void_v<R>, no_step_results, step_results<R>>;

} // namespace detail

template <class R, class F>
class coroutine_step final : public replica_step,
                             public detail::step_results_of<R> {
public:
  coroutine_step(F fn, int num_replicas, int first = 0)
    : detail::step_results_of<R>(num_replicas, first), fn_(std::move(fn)) {}
  void run(replica_context& ctx) override {
    ctx.impl_->start_coroutine(drive(ctx));
  }

private:
  // ctx is the replica's own context and the step is kept alive by the
  // replica until it ends: both outlive the frame.
  step_task<void> drive(replica_context& ctx) {
    if constexpr (std::is_void_v<R>) {
      co_await fn_(ctx);
    } else {
      this->store(ctx.replica_id(), co_await fn_(ctx));
    }
  }

  F fn_;
};

/// Any callable that a replica step can run.
template <class F>
concept step_function = std::invocable<F&, replica_context&>;

template <step_function F>
using step_function_result_t = std::invoke_result_t<F&, replica_context&>;

namespace detail {

template <class T>
struct step_value {
  using type = T;
};

template <class R>
struct step_value<step_task<R>> {
  using type = R;
};

} // namespace detail

/// What a step leaves per replica: fn's result, or R for a coroutine step
/// returning step_task<R>.
template <step_function F>
using step_result_t = typename detail::step_value<step_function_result_t<F>>::type;

template <step_function F>
constexpr bool is_coroutine_step
  = detail::is_step_task<step_function_result_t<F>>::value;

/// A value-returning step and where to take its results from.
template <class R>
struct step_with_results {
  /// What run_atom carries.
  replica_step_ptr step;
  /// results->take() after the coordinator answered the run with ok.
  std::shared_ptr<step_results<R>> results;
};

/// A step running `fn` on each of `num_replicas` replicas with ids from
/// `first` (the strategy's replicas in this process: a replica whose id has
/// no result slot fails the step):
/// for a void fn, a replica_step_ptr; otherwise {step, results}:
///   auto [step, results] = make_step(fn, n);
///   request(coordinator, timeout, run_atom::value, step)
///     .then([results](ok_atom) { auto values = results->take(); ... });
template <step_function F>
auto make_step(F fn, int num_replicas, int first = 0) {
  using R = step_result_t<F>;
  if constexpr (is_coroutine_step<F>) {
    auto step = std::make_shared<coroutine_step<R, F>>(std::move(fn),
                                                       num_replicas, first);
    if constexpr (std::is_void_v<R>)
      return replica_step_ptr{step};
    else
      return step_with_results<R>{step, step};
  } else if constexpr (std::is_void_v<R>) {
    return replica_step_ptr{std::make_shared<void_step<F>>(std::move(fn))};
  } else {
    auto step = std::make_shared<value_step<R, F>>(std::move(fn),
                                                   num_replicas, first);
    return step_with_results<R>{step, step};
  }
}

} // namespace varsync
