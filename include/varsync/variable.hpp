#pragma once
// A variable: what a client asks for when it creates one, what the registry
// records once the request is validated (the policy resolved), and the
// handle to it: cheap to copy, immutable. Operations on it go through the
// strategy (cross-replica) or a replica_context.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <caf/error.hpp>
#include <caf/meta/load_callback.hpp>
#include <caf/meta/type_name.hpp>
#include <caf/sec.hpp>

#include "varsync/tensor.hpp"
#include "varsync/internal/tensor_inspect.hpp"
#include "varsync/synchronization.hpp"

// -- scatter -----------------------------------------------------------------
// Sparse updates (TensorFlow's scatter_* with tf.IndexedSlices): rows of a
// variable picked by their index along the first axis, each combined with
// one row of values. docs/semantics.md, rows S1-S5.
namespace varsync {

/// How a row y of a scatter combines with the row c it names.
enum class scatter_op : uint8_t {
  update = 0, // c = y
  add = 1,    // c = c + y
  sub = 2,    // c = c - y
  mul = 3,    // c = c * y
  div = 4,    // c = c / y (integers: truncated; a zero divisor is refused)
  min = 5,    // c = min(c, y)
  max = 6,    // c = max(c, y)
};

constexpr bool is_valid(scatter_op x) {
  return static_cast<uint8_t>(x) <= static_cast<uint8_t>(scatter_op::max);
}

/// "scatter_update", "scatter_add", ...
std::string_view to_string(scatter_op x);

/// Rows of a variable and their values, as tf.IndexedSlices: `values` has
/// the variable's dtype and shape [k, d1, ...] for a variable of shape
/// [d0, d1, ...]; row j of `values` goes to row indices[j] (0 <= index < d0).
struct indexed_slices {
  std::vector<int64_t> indices;
  tensor values;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, indexed_slices& x) {
  return f(caf::meta::type_name("varsync::indexed_slices"), x.indices,
           x.values);
}

} // namespace varsync

namespace varsync {

struct variable_spec {
  std::string name;
  tensor initial_value;
  synchronization sync = synchronization::auto_;
  aggregation agg = aggregation::none;
  /// Unset: false for on_read, true otherwise (C4).
  std::optional<bool> trainable;
};

struct variable_info {
  uint64_t id = 0;
  std::string name;
  dtype type = dtype::float32;
  tensor_shape shape;
  synchronization sync = synchronization::on_write;
  aggregation agg = aggregation::none;
  bool trainable = true;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, variable_spec& x) {
  // -1: unset, 0: false, 1: true (CAF 0.17 has no std::optional support).
  int8_t trainable = x.trainable ? static_cast<int8_t>(*x.trainable) : -1;
  auto load = caf::meta::load_callback([&]() -> caf::error {
    // V4: an enum byte outside its range never leaves deserialization.
    if (!is_valid(x.sync) || !is_valid(x.agg) || trainable < -1
        || trainable > 1)
      return caf::sec::invalid_argument;
    if (trainable < 0)
      x.trainable.reset();
    else
      x.trainable = trainable != 0;
    return caf::none;
  });
  return f(caf::meta::type_name("varsync::variable_spec"), x.name,
           x.initial_value, x.sync, x.agg, trainable, load);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, variable_info& x) {
  auto load = caf::meta::load_callback([&]() -> caf::error {
    if (!is_valid(x.type) || !is_valid(x.sync) || !is_valid(x.agg))
      return caf::sec::invalid_argument;
    return caf::none;
  });
  return f(caf::meta::type_name("varsync::variable_info"), x.id, x.name,
           x.type, x.shape, x.sync, x.agg, x.trainable, load);
}


class variable {
public:
  variable() = default;
  explicit variable(variable_info info)
    : info_(std::make_shared<const variable_info>(std::move(info))) {}
  /// Shares `info` (the library hands out the description its coordinator
  /// keeps: one copy per variable). Null: an invalid handle.
  explicit variable(std::shared_ptr<const variable_info> info)
    : info_(std::move(info)) {}

  bool valid() const { return info_ != nullptr; }
  const variable_info& info() const { return *info_; }

  uint64_t id() const { return info_->id; }
  const std::string& name() const { return info_->name; }
  dtype type() const { return info_->type; }
  const tensor_shape& shape() const { return info_->shape; }
  /// The resolved synchronization (never auto, C1).
  varsync::synchronization synchronization() const { return info_->sync; }
  varsync::aggregation aggregation() const { return info_->agg; }
  bool trainable() const { return info_->trainable; }

private:
  std::shared_ptr<const variable_info> info_;
};

} // namespace varsync
