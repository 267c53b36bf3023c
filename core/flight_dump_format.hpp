#pragma once
// A flight recorder dump's file (M8): the report of to_json(
// strategy_description) with why and when it was written, as one JSON
// object (implemented beside to_json in core/metrics_format.cpp).

#include <cstdint>
#include <string>

#include "varsync/strategy_description.hpp"

namespace varsync {

/// {"reason", "detail", "pid", "unix_ms", "process", "dispatched",
/// "operations": [...]}.
std::string flight_dump_json(const strategy_description& d,
                             const std::string& reason,
                             const std::string& detail, int64_t pid,
                             int64_t unix_ms);

} // namespace varsync
