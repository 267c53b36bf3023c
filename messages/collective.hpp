#pragma once
// Collective plans travel by shared pointer between in-process actors only.

#include <memory>

#include <caf/allowed_unsafe_message_type.hpp>

namespace varsync {

struct collective_plan;
using collective_plan_ptr = std::shared_ptr<collective_plan>;

} // namespace varsync

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(varsync::collective_plan_ptr)
