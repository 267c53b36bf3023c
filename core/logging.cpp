#include "core/logging.hpp"

#include <cstdlib>
#include <string>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

namespace varsync {

namespace {

bool parse_level(std::string_view name, spdlog::level::level_enum& out) {
  auto level = spdlog::level::from_str(std::string{name});
  // from_str maps unknown names to off; accept "off" only when asked.
  if (level == spdlog::level::off && name != "off")
    return false;
  out = level;
  return true;
}

std::shared_ptr<spdlog::logger> make_logger() {
  auto logger = spdlog::get("varsync");
  if (!logger)
    logger = spdlog::stderr_color_mt("varsync");
  auto level = spdlog::level::warn;
  if (const char* env = std::getenv("VARSYNC_LOG_LEVEL"))
    parse_level(env, level);
  logger->set_level(level);
  return logger;
}

} // namespace

spdlog::logger* log() {
  static std::shared_ptr<spdlog::logger> instance = make_logger();
  return instance.get();
}

bool set_log_level(std::string_view name) {
  spdlog::level::level_enum level;
  if (!parse_level(name, level))
    return false;
  log()->set_level(level);
  return true;
}

bool is_log_level(std::string_view name) {
  spdlog::level::level_enum level;
  return parse_level(name, level);
}

} // namespace varsync
