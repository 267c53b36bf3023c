#pragma once
// Distributed values (tf.distribute.DistributedValues): per_replica holds one
// value per replica in replica order (D1); mirrored holds one value known to
// be equal on every replica (D2).

#include <cstddef>
#include <stdexcept>
#include <utility>
#include <vector>

namespace varsync {

template <class T>
class per_replica {
public:
  per_replica() = default;
  explicit per_replica(std::vector<T> values) : values_(std::move(values)) {}

  /// Builds value r as fn(r) for r in [0, num_replicas) (D1).
  template <class F>
  static per_replica from_function(int num_replicas, F&& fn) {
    std::vector<T> values;
    values.reserve(static_cast<size_t>(num_replicas));
    for (int r = 0; r < num_replicas; ++r)
      values.push_back(fn(r));
    return per_replica{std::move(values)};
  }

  size_t size() const { return values_.size(); }
  const T& operator[](size_t replica) const { return values_.at(replica); }
  const std::vector<T>& values() const { return values_; }
  auto begin() const { return values_.begin(); }
  auto end() const { return values_.end(); }

private:
  std::vector<T> values_;
};

template <class T>
class mirrored {
public:
  mirrored(T value, int num_replicas)
    : value_(std::move(value)), num_replicas_(num_replicas) {
    if (num_replicas < 1)
      throw std::invalid_argument("mirrored: num_replicas must be >= 1");
  }

  /// The value, equal on every replica.
  const T& value() const { return value_; }
  /// The value as seen by `replica` (the same for all).
  const T& operator[](size_t replica) const {
    if (replica >= static_cast<size_t>(num_replicas_))
      throw std::out_of_range("mirrored: replica index out of range");
    return value_;
  }
  int num_replicas() const { return num_replicas_; }

private:
  T value_;
  int num_replicas_;
};

} // namespace varsync
