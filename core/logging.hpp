#pragma once
// varsync's logger (spdlog, named "varsync"). Quiet by default (warnings and
// errors only); the level comes from the environment variable
// VARSYNC_LOG_LEVEL, from the actor system config entry "varsync.log-level",
// or from set_log_level. Levels: trace, debug, info, warn, error, off.

#include <memory>
#include <string_view>

#include <spdlog/logger.h>

namespace varsync {

/// The "varsync" logger, created on first use.
spdlog::logger* log();

/// Sets the level by name; returns false (and changes nothing) for an
/// unknown name.
bool set_log_level(std::string_view level);

/// True if set_log_level accepts `level`.
bool is_log_level(std::string_view level);

} // namespace varsync
