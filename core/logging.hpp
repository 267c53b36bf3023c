#pragma once
// varsync's logger (spdlog, named "varsync"). Quiet by default (warnings and
// errors only); the level comes from the environment variable
// VARSYNC_LOG_LEVEL, from the actor system config entry "varsync.log-level",
// or from set_log_level. Levels: trace, debug, info, warn, error, off.

#include <chrono>
#include <cstddef>
#include <memory>
#include <mutex>
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

/// One message a period at most, for what a peer can make happen as often
/// as it likes (a flood of refused connections must not become a flood of
/// log lines). Thread-safe.
class log_throttle {
public:
  explicit log_throttle(
    std::chrono::milliseconds period = std::chrono::milliseconds{1000})
    : period_(period) {
  }

  /// True when a message may go out now; `held_back` is then how many were
  /// held back since the last one.
  bool admit(size_t& held_back) {
    std::lock_guard<std::mutex> lock{mtx_};
    auto now = std::chrono::steady_clock::now();
    if (now < quiet_until_) {
      ++held_back_;
      return false;
    }
    held_back = held_back_;
    held_back_ = 0;
    quiet_until_ = now + period_;
    return true;
  }

private:
  std::mutex mtx_;
  std::chrono::milliseconds period_;
  std::chrono::steady_clock::time_point quiet_until_{};
  size_t held_back_ = 0;
};

} // namespace varsync
