#pragma once
// Sparse updates (TensorFlow's scatter_* with tf.IndexedSlices): rows of a
// variable picked by their index along the first axis, each combined with
// one row of values. docs/semantics.md, rows S1-S5.

#include <cstdint>
#include <string_view>
#include <vector>

#include <caf/error.hpp>
#include <caf/meta/load_callback.hpp>
#include <caf/meta/type_name.hpp>
#include <caf/sec.hpp>

#include "varsync/tensor.hpp"
#include "varsync/internal/tensor_inspect.hpp"

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

/// invalid_argument naming `variable` and the value unless `op` is valid.
caf::error check_scatter_op(scatter_op op, std::string_view variable);

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
