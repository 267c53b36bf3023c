#pragma once
// A variable's description, immutable and shared by the coordinator and the
// replicas of one process: one copy per variable, not one per component.
// It travels between in-process actors only.

#include <memory>

#include <caf/allowed_unsafe_message_type.hpp>

#include "varsync/variable.hpp"

namespace varsync {

using shared_variable_info = std::shared_ptr<const variable_info>;

/// The description and its count in one block from a process-wide pool of
/// its own, not from malloc among the calls that create variables
/// (core/small_object_pool.hpp). Its name and shape, when longer than a
/// std::string or std::vector holds inline, still come from malloc.
shared_variable_info make_shared_variable_info(variable_info info);

} // namespace varsync

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(varsync::shared_variable_info)
