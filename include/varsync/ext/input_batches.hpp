#pragma once
// Batches for run() (rule I6 of docs/semantics.md): a user's batch function,
// called for each of this process's replicas with the items the sampler gave
// it, makes the per_replica batches a step reads by replica id, as
// TensorFlow's distribute_datasets_from_function does with an InputContext.

#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <caf/expected.hpp>

#include "varsync/distributed_values.hpp"
#include "varsync/error.hpp"
#include "varsync/replica_context.hpp"
#include "varsync/ext/sampler.hpp"
#include "varsync/strategy.hpp"

namespace varsync::input {

/// What a batch function learns about its replica's share of a step.
struct input_context {
  int replica_id = 0;    ///< global replica id
  int num_replicas = 0;  ///< every replica, in every process
  int64_t epoch = 0;
  int64_t step = 0;
  /// The full per-replica batch size (global / replicas); `items` may hold
  /// fewer at the end of an epoch (uneven_end::partial).
  int64_t per_replica_batch_size = 0;
  /// The step's items over every replica: divide a sum of per-item losses
  /// by it for the exact global mean, however uneven the batches.
  int64_t global_count = 0;
  std::span<const int64_t> items; ///< this replica's items, in order
};

/// This process's replicas' batches of one step, found by global replica id.
template <class T>
class replica_batches {
public:
  replica_batches(per_replica<T> values, int first_local, int64_t global_count)
    : values_(std::move(values)), first_local_(first_local),
      global_count_(global_count) {}

  /// The batch of replica `replica_id` (global); std::out_of_range for a
  /// replica of another process.
  const T& of(int replica_id) const {
    if (replica_id < first_local_)
      throw std::out_of_range("replica_batches: replica " + std::to_string(replica_id)
                              + " is not in this process");
    return values_[static_cast<size_t>(replica_id - first_local_)];
  }
  /// The batch of the replica running `ctx`'s step.
  const T& operator[](const replica_context& ctx) const { return of(ctx.replica_id()); }
  /// The local replicas' batches in replica order (as run() returns results).
  const per_replica<T>& values() const { return values_; }
  int64_t global_count() const { return global_count_; }

private:
  per_replica<T> values_;
  int first_local_;
  int64_t global_count_;
};

/// The batches of `step` (from sampler.next()) for this process's replicas:
/// value r is fn(input_context of replica first_local_replica() + r).
/// invalid_argument when the sampler was made for another replica count
/// than the strategy's.
template <class F>
auto make_batches(const strategy& s, const distributed_sampler& sampler,
                  const step_items& step, F&& fn)
  -> caf::expected<replica_batches<std::invoke_result_t<F&, const input_context&>>> {
  using batch = std::invoke_result_t<F&, const input_context&>;
  if (sampler.num_replicas() != s.num_replicas()
      || step.items.size() != static_cast<size_t>(s.num_replicas()))
    return make_error(errc::invalid_argument,
                      "make_batches: the sampler shares among "
                        + std::to_string(sampler.num_replicas())
                        + " replicas; expected the strategy's "
                        + std::to_string(s.num_replicas()));
  const int first = s.first_local_replica();
  const int64_t count = step.global_count();
  auto values = per_replica<batch>::from_function(
    s.num_local_replicas(), [&](int local) {
      const auto& items = step.items[static_cast<size_t>(first + local)];
      input_context ctx{first + local, s.num_replicas(), step.epoch, step.step,
                        sampler.per_replica_batch_size(), count,
                        std::span<const int64_t>{items}};
      return fn(std::as_const(ctx));
    });
  return replica_batches<batch>{std::move(values), first, count};
}

/// The next step's batches: sampler.next(), then make_batches. On an error
/// value the sampler has not moved; an exception from `fn` propagates with
/// the sampler past the step.
template <class F>
auto next_batches(const strategy& s, distributed_sampler& sampler, F&& fn)
  -> decltype(make_batches(s, sampler, std::declval<const step_items&>(), fn)) {
  if (sampler.num_replicas() != s.num_replicas())
    return make_batches(s, sampler, step_items{}, fn); // its error
  auto step = sampler.next();
  if (!step)
    return std::move(step.error());
  return make_batches(s, sampler, *step, fn);
}

} // namespace varsync::input
