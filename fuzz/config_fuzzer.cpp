// Fuzzes varsync's configuration as it arrives from outside: the log level
// name (VARSYNC_LOG_LEVEL, "varsync.log-level", set_log_level) and the
// entries "varsync.log-level" / "varsync.timeout-ms" /
// "varsync.memory-budget-mb" / "varsync.max-queued-operations" /
// "varsync.max-queued-mb" of an actor system
// config filled from a CAF config file or from command-line arguments
// (options declared by register_types, read and checked by read_config, the
// reader strategy creation uses).
//
// Input layout: byte 0 selects the source (0: a level name, 1: the text of a
// config file, 2: command-line arguments, one per line); the rest is the text.
// Properties: set_log_level accepts exactly spdlog's level names and leaves
// the level alone otherwise; a parsed config either fails read_config with
// invalid_argument and a message naming a varsync entry, or yields a
// positive timeout equal to the config's entry (30 s when unset), a memory
// budget equal to its entry in MiB (0 when unset, below 2^44 MiB), overload
// bounds equal to their entries (positive; at most 2^24 MiB; 4096 calls and
// 256 MiB when unset) and a log level that is either a valid name or reported
// as unknown.

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <caf/actor_system_config.hpp>
#include <caf/settings.hpp>

#include "varsync/error.hpp"
#include "core/logging.hpp"
#include "fuzz_check.hpp"
#include "varsync/config.hpp"

using namespace varsync;

namespace {

// spdlog 1.10's level names and its two short forms (spdlog::level::from_str).
constexpr std::array<std::string_view, 9> level_names{
  "trace", "debug", "info", "warning", "warn", "error", "err", "critical", "off"};

void check_level_name(std::string_view text) {
  set_log_level("off");
  bool known = std::find(level_names.begin(), level_names.end(), text)
               != level_names.end();
  FUZZ_CHECK(is_log_level(text) == known, "is_log_level disagrees with spdlog's names");
  bool accepted = set_log_level(text);
  FUZZ_CHECK(accepted == known, "set_log_level accepted an unknown name or refused a known one");
  if (!accepted)
    FUZZ_CHECK(log()->level() == spdlog::level::off,
               "a refused name changed the level");
  set_log_level("off"); // quiet while fuzzing
}

void check_settings(const caf::actor_system_config& cfg) {
  auto s = read_config(cfg);
  const auto& content = caf::content(cfg);
  auto* timeout_entry = caf::get_if(&content, "varsync.timeout-ms");
  auto* level_entry = caf::get_if(&content, "varsync.log-level");
  auto* budget_entry = caf::get_if(&content, "varsync.memory-budget-mb");
  auto* ops_entry = caf::get_if(&content, "varsync.max-queued-operations");
  auto* mb_entry = caf::get_if(&content, "varsync.max-queued-mb");
  if (!s) {
    FUZZ_CHECK(has_code(s.error(), errc::invalid_argument),
               "read_config failed with another code");
    FUZZ_CHECK(message_of(s.error()).find("varsync.") != std::string::npos,
               "the error does not name the entry");
    FUZZ_CHECK(timeout_entry != nullptr || level_entry != nullptr
                 || budget_entry != nullptr || ops_entry != nullptr
                 || mb_entry != nullptr,
               "read_config failed without a varsync entry");
    return;
  }
  // The overload bounds (V3): positive, equal to their entries, else the
  // defaults.
  FUZZ_CHECK(s->max_queued_operations > 0 && s->max_queued_bytes > 0,
             "an unbounded queue accepted");
  if (ops_entry == nullptr) {
    FUZZ_CHECK(s->max_queued_operations == 4096,
               "default max-queued-operations is not 4096");
  } else {
    auto* n = caf::get_if<int64_t>(ops_entry);
    FUZZ_CHECK(n != nullptr && static_cast<size_t>(*n) == s->max_queued_operations,
               "max-queued-operations differs from the config entry");
  }
  if (mb_entry == nullptr) {
    FUZZ_CHECK(s->max_queued_bytes == size_t{256} << 20,
               "default max-queued-mb is not 256");
  } else {
    auto* mb = caf::get_if<int64_t>(mb_entry);
    // In range first: a shifted huge entry could wrap to an equal value.
    FUZZ_CHECK(mb != nullptr && *mb > 0 && *mb <= (int64_t{1} << 24)
                 && (static_cast<size_t>(*mb) << 20) == s->max_queued_bytes,
               "max-queued-mb differs from the config entry");
  }
  FUZZ_CHECK(s->timeout.count() > 0, "non-positive timeout accepted");
  if (timeout_entry == nullptr) {
    FUZZ_CHECK(s->timeout.count() == 30000, "default timeout is not 30 s");
  } else {
    auto* ms = caf::get_if<int64_t>(timeout_entry);
    FUZZ_CHECK(ms != nullptr && *ms == s->timeout.count(),
               "timeout differs from the config entry");
  }
  if (budget_entry == nullptr) {
    FUZZ_CHECK(s->memory_budget_bytes == 0, "a budget without an entry");
  } else {
    auto* mb = caf::get_if<int64_t>(budget_entry);
    FUZZ_CHECK(mb != nullptr && *mb >= 0 && *mb < (int64_t{1} << 44)
                 && s->memory_budget_bytes == static_cast<uint64_t>(*mb) << 20,
               "memory budget differs from the config entry");
  }
  FUZZ_CHECK(s->log_level.empty() || s->unknown_log_level.empty(),
             "a level both known and unknown");
  FUZZ_CHECK(s->log_level.empty() || is_log_level(s->log_level),
             "an unknown level reported as valid");
  FUZZ_CHECK(s->unknown_log_level.empty() || !is_log_level(s->unknown_log_level),
             "a valid level reported as unknown");
  if (level_entry == nullptr)
    FUZZ_CHECK(s->log_level.empty() && s->unknown_log_level.empty(),
               "a level without an entry");
}


// Entries that make CAF print help or a config dump are skipped: they test
// CAF's output, not varsync's entries.
bool prints(std::string_view text) {
  for (auto word : {"help", "dump-config"})
    if (text.find(word) != std::string_view::npos)
      return true;
  return false;
}

int check_config_file(std::string_view text) {
  if (prints(text))
    return -1;
  caf::actor_system_config cfg;
  register_types(cfg);
  std::istringstream ini{std::string{text}};
  if (cfg.parse(caf::actor_system_config::string_list{}, ini))
    return 0; // CAF refused the file: the application stops before varsync
  check_settings(cfg);
  return 0;
}

// Arguments that print (above), read a file named by the input or are short
// options (-h prints help) are skipped as well.
bool harmless(std::string_view arg) {
  if (prints(arg) || arg.find("config-file") != std::string_view::npos)
    return false;
  return !(arg.size() >= 2 && arg[0] == '-' && arg[1] != '-');
}

int check_command_line(std::string_view text) {
  caf::actor_system_config::string_list args;
  size_t start = 0;
  while (start <= text.size() && args.size() < 16) {
    auto end = text.find('\n', start);
    if (end == std::string_view::npos)
      end = text.size();
    auto arg = text.substr(start, end - start);
    if (!harmless(arg))
      return -1;
    args.emplace_back(arg);
    start = end + 1;
  }
  caf::actor_system_config cfg;
  register_types(cfg);
  std::istringstream no_file; // parse() reads no file when given a stream
  no_file.setstate(std::ios::failbit);
  if (cfg.parse(std::move(args), no_file))
    return 0;
  check_settings(cfg);
  return 0;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0)
    return 0;
  std::string_view text{reinterpret_cast<const char*>(data) + 1, size - 1};
  switch (data[0] % 3) {
    case 0:
      check_level_name(text);
      return 0;
    case 1:
      return check_config_file(text);
    default:
      return check_command_line(text);
  }
}
