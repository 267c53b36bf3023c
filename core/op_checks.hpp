#pragma once
// The checks of an operation's enum arguments that the coordinator, the
// replicas and the scatter kernels share: a value outside the enum (a cast,
// a deserialized byte) is invalid_argument naming the variable or the call.

#include <string_view>

#include <caf/error.hpp>

#include "varsync/synchronization.hpp"
#include "varsync/variable.hpp"

namespace varsync {

/// invalid_argument naming `variable` and the value unless `op` is valid.
caf::error check_update_op(update_op op, std::string_view variable);

/// invalid_argument naming `what` (the call) and the value unless `op` is
/// valid.
caf::error check_reduce_op(reduce_op op, std::string_view what);

/// invalid_argument naming `variable` and the value unless `op` is valid.
caf::error check_scatter_op(scatter_op op, std::string_view variable);

} // namespace varsync
