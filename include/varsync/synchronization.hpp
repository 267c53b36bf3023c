#pragma once
// tf.VariableSynchronization and tf.VariableAggregation, with TensorFlow's
// numeric values so that configs and files interoperate, plus the reduction and
// update operators. These headers are leaves: messages/ may include them.

#include <cstdint>
#include <string_view>

#include <caf/expected.hpp>

namespace varsync {

enum class synchronization : uint8_t {
  auto_ = 0,
  none = 1,
  on_write = 2,
  on_read = 3,
};

enum class aggregation : uint8_t {
  none = 0,
  sum = 1,
  mean = 2,
  only_first_replica = 3,
};

/// Elementwise reductions across replicas (and along an axis for `reduce`).
enum class reduce_op : uint8_t {
  sum = 0,
  mean = 1,
  min = 2,
  max = 3,
  prod = 4,
};

/// How an update value y combines with a component c.
enum class update_op : uint8_t {
  assign = 0,     // c = y
  assign_add = 1, // c = c + y
  assign_sub = 2, // c = c - y
};

std::string_view to_string(synchronization x);
std::string_view to_string(aggregation x);
std::string_view to_string(reduce_op x);
std::string_view to_string(update_op x);

/// Parses TensorFlow's integer value; `variable` names the variable in the
/// error (`invalid_synchronization`).
caf::expected<synchronization> parse_synchronization(int64_t value,
                                                     std::string_view variable);
/// Parses "auto", "none", "on_write", "on_read" (also TF's upper-case names).
caf::expected<synchronization>
parse_synchronization(std::string_view text, std::string_view variable);

caf::expected<aggregation> parse_aggregation(int64_t value,
                                             std::string_view variable);
/// Parses "none", "sum", "mean", "only_first_replica" (also upper case).
caf::expected<aggregation> parse_aggregation(std::string_view text,
                                             std::string_view variable);

caf::expected<reduce_op> parse_reduce_op(std::string_view text);

/// Range checks of values that arrive as enums (V4): a cast from an integer
/// or a deserialized message can hold any byte.
constexpr bool is_valid(synchronization x) {
  return static_cast<uint8_t>(x) <= static_cast<uint8_t>(synchronization::on_read);
}
constexpr bool is_valid(aggregation x) {
  return static_cast<uint8_t>(x)
         <= static_cast<uint8_t>(aggregation::only_first_replica);
}
constexpr bool is_valid(reduce_op x) {
  return static_cast<uint8_t>(x) <= static_cast<uint8_t>(reduce_op::prod);
}
constexpr bool is_valid(update_op x) {
  return static_cast<uint8_t>(x) <= static_cast<uint8_t>(update_op::assign_sub);
}

} // namespace varsync
