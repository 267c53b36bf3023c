#pragma once
// A run of a collective travels by shared pointer between in-process actors
// only: it binds pointers into this process's memory
// (sync/collectives/collective_algorithm.hpp). Its plan is a value.

#include <memory>

#include <caf/allowed_unsafe_message_type.hpp>

namespace varsync {

struct collective_run;
using collective_run_ptr = std::shared_ptr<collective_run>;

} // namespace varsync

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(varsync::collective_run_ptr)
