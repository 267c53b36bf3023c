#include "varsync/variable.hpp"

#include <string>

#include "core/op_checks.hpp"
#include "varsync/error.hpp"

namespace varsync {

std::string_view to_string(scatter_op x) {
  switch (x) {
    case scatter_op::update: return "scatter_update";
    case scatter_op::add: return "scatter_add";
    case scatter_op::sub: return "scatter_sub";
    case scatter_op::mul: return "scatter_mul";
    case scatter_op::div: return "scatter_div";
    case scatter_op::min: return "scatter_min";
    case scatter_op::max: return "scatter_max";
  }
  return "invalid";
}

caf::error check_scatter_op(scatter_op op, std::string_view var) {
  if (is_valid(op))
    return {};
  return make_error(errc::invalid_argument,
                    "variable '" + std::string{var} + "': scatter op "
                      + std::to_string(static_cast<int>(op))
                      + " is not one of 0 (update), 1 (add), 2 (sub), "
                        "3 (mul), 4 (div), 5 (min), 6 (max)");
}

} // namespace varsync
