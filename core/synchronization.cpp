#include "varsync/synchronization.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <string>
#include <utility>

#include "core/op_checks.hpp"
#include "varsync/error.hpp"

namespace varsync {

namespace {

std::string lower(std::string_view s) {
  std::string out{s};
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  return out;
}

std::string quote_name(std::string_view s) {
  std::string out = "'";
  out += s;
  out += "'";
  return out;
}

} // namespace

std::string_view to_string(synchronization x) {
  switch (x) {
    case synchronization::auto_: return "auto";
    case synchronization::none: return "none";
    case synchronization::on_write: return "on_write";
    case synchronization::on_read: return "on_read";
  }
  return "invalid";
}

std::string_view to_string(aggregation x) {
  switch (x) {
    case aggregation::none: return "none";
    case aggregation::sum: return "sum";
    case aggregation::mean: return "mean";
    case aggregation::only_first_replica: return "only_first_replica";
  }
  return "invalid";
}

std::string_view to_string(reduce_op x) {
  switch (x) {
    case reduce_op::sum: return "sum";
    case reduce_op::mean: return "mean";
    case reduce_op::min: return "min";
    case reduce_op::max: return "max";
    case reduce_op::prod: return "prod";
  }
  return "invalid";
}

std::string_view to_string(update_op x) {
  switch (x) {
    case update_op::assign: return "assign";
    case update_op::assign_add: return "assign_add";
    case update_op::assign_sub: return "assign_sub";
  }
  return "invalid";
}

caf::expected<synchronization> parse_synchronization(int64_t value,
                                                     std::string_view var) {
  if (value >= 0 && value <= 3)
    return static_cast<synchronization>(value);
  return make_error(errc::invalid_synchronization,
                    "variable " + quote_name(var) + ": synchronization value "
                      + std::to_string(value)
                      + " is not one of 0 (auto), 1 (none), 2 (on_write), "
                        "3 (on_read)");
}

caf::expected<synchronization> parse_synchronization(std::string_view text,
                                                     std::string_view var) {
  static constexpr std::array<std::pair<std::string_view, synchronization>, 4>
    names{{{"auto", synchronization::auto_},
           {"none", synchronization::none},
           {"on_write", synchronization::on_write},
           {"on_read", synchronization::on_read}}};
  auto key = lower(text);
  for (auto& [name, value] : names)
    if (key == name)
      return value;
  return make_error(errc::invalid_synchronization,
                    "variable " + quote_name(var) + ": synchronization "
                      + quote_name(text)
                      + " is not one of auto, none, on_write, on_read");
}

caf::expected<aggregation> parse_aggregation(int64_t value,
                                             std::string_view var) {
  if (value >= 0 && value <= 3)
    return static_cast<aggregation>(value);
  return make_error(errc::invalid_aggregation,
                    "variable " + quote_name(var) + ": aggregation value "
                      + std::to_string(value)
                      + " is not one of 0 (none), 1 (sum), 2 (mean), "
                        "3 (only_first_replica)");
}

caf::expected<aggregation> parse_aggregation(std::string_view text,
                                             std::string_view var) {
  static constexpr std::array<std::pair<std::string_view, aggregation>, 4>
    names{{{"none", aggregation::none},
           {"sum", aggregation::sum},
           {"mean", aggregation::mean},
           {"only_first_replica", aggregation::only_first_replica}}};
  auto key = lower(text);
  for (auto& [name, value] : names)
    if (key == name)
      return value;
  return make_error(errc::invalid_aggregation,
                    "variable " + quote_name(var) + ": aggregation " + quote_name(text)
                      + " is not one of none, sum, mean, only_first_replica");
}

caf::expected<reduce_op> parse_reduce_op(std::string_view text) {
  static constexpr std::array<std::pair<std::string_view, reduce_op>, 5> names{
    {{"sum", reduce_op::sum},
     {"mean", reduce_op::mean},
     {"min", reduce_op::min},
     {"max", reduce_op::max},
     {"prod", reduce_op::prod}}};
  auto key = lower(text);
  for (auto& [name, value] : names)
    if (key == name)
      return value;
  return make_error(errc::invalid_argument,
                    "reduce op " + quote_name(text)
                      + " is not one of sum, mean, min, max, prod");
}

caf::error check_update_op(update_op op, std::string_view var) {
  if (is_valid(op))
    return {};
  return make_error(errc::invalid_argument,
                    "variable " + quote_name(var) + ": update op "
                      + std::to_string(static_cast<int>(op))
                      + " is not one of 0 (assign), 1 (assign_add), "
                        "2 (assign_sub)");
}

caf::error check_reduce_op(reduce_op op, std::string_view what) {
  if (is_valid(op))
    return {};
  return make_error(errc::invalid_argument,
                    std::string{what} + ": reduce op "
                      + std::to_string(static_cast<int>(op))
                      + " is not one of 0 (sum), 1 (mean), 2 (min), 3 (max), "
                        "4 (prod)");
}

} // namespace varsync
