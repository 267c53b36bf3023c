#include "varsync/config.hpp"

#include <caf/actor_system_config.hpp>
#include <caf/settings.hpp>

#include "varsync/error.hpp"
#include "core/logging.hpp"
#include "messages/coordinator_interface.hpp"
#include "messages/operation_sequencer.hpp"
#include "messages/replica_interface.hpp"
#include "messages/system_lifetime.hpp"

namespace varsync {

namespace {

// CAF 0.17 keeps the option set protected; declared options are what
// cfg.set() and config files can fill in.
struct config_access : caf::actor_system_config {
  static caf::config_option_set& options(caf::actor_system_config& cfg) {
    return cfg.*(&config_access::custom_options_);
  }
};

} // namespace

void tune_scheduler(caf::actor_system_config& cfg) {
  // Idle workers skip CAF's sleeping poll phase: they spin its attempts
  // without sleeping, then wait on their condition variable, which new
  // work from outside the scheduler signals (spread_sends relies on it).
  cfg.set("work-stealing.moderate-sleep-duration", caf::timespan{0});
}

void register_types(caf::actor_system_config& cfg) {
  detail::watch_system_lifetime(cfg);
  config_access::options(cfg)
    .add<std::string>("varsync", "log-level",
                      "trace, debug, info, warn (default), error or off")
    .add<int64_t>("varsync", "timeout-ms",
                  "default deadline of every call, in milliseconds")
    .add<int64_t>("varsync", "memory-budget-mb",
                  "most host memory varsync may hold, in MiB (0: automatic)")
    .add<int64_t>("varsync", "max-queued-operations",
                  "operations a queue holds before refusing (overloaded)")
    .add<int64_t>("varsync", "max-queued-mb",
                  "tensor MiB a queue holds before refusing (overloaded)");
  cfg.add_message_type<tensor>("varsync::tensor");
  cfg.add_message_type<variable_spec>("varsync::variable_spec");
  cfg.add_message_type<variable_info>("varsync::variable_info");
  cfg.add_message_type<std::vector<variable_info>>(
    "std::vector<varsync::variable_info>");
  cfg.add_message_type<std::vector<tensor>>("std::vector<varsync::tensor>");
  cfg.add_message_type<std::vector<std::vector<tensor>>>(
    "std::vector<std::vector<varsync::tensor>>");
  cfg.add_message_type<recorded_update>("varsync::recorded_update");
  cfg.add_message_type<indexed_slices>("varsync::indexed_slices");
  cfg.add_message_type<step_report>("varsync::step_report");
  cfg.add_message_type<sequenced_operation>("varsync::sequenced_operation");
  cfg.add_message_type<sequence_link_actor>("varsync::sequence_link_actor");
  cfg.add_message_type<strategy_description>("varsync::strategy_description");
  cfg.add_message_type<strategy_metrics>("varsync::strategy_metrics");
  cfg.add_message_type<replica_usage>("varsync::replica_usage");
  cfg.add_message_type<write_outcomes>("varsync::write_outcomes");
  cfg.add_message_type<replica_actor>("varsync::replica_actor");
  cfg.add_message_type<std::vector<replica_actor>>(
    "std::vector<varsync::replica_actor>");
  cfg.add_error_category(error_category,
                         [](uint8_t code, caf::atom_value,
                            const caf::message& ctx) {
                           std::string out = "varsync::";
                           out += to_string(static_cast<errc>(code));
                           if (ctx.size() == 1
                               && ctx.match_element<std::string>(0)) {
                             out += ": ";
                             out += ctx.get_as<std::string>(0);
                           }
                           return out;
                         });
}

caf::expected<config_settings>
read_config(const caf::actor_system_config& cfg) {
  config_settings out;
  const auto& content = caf::content(cfg);
  if (auto* value = caf::get_if(&content, "varsync.log-level")) {
    auto* name = caf::get_if<std::string>(value);
    if (name == nullptr)
      return make_error(errc::invalid_argument,
                        "varsync.log-level must be a string");
    if (is_log_level(*name))
      out.log_level = *name;
    else
      out.unknown_log_level = *name;
  }
  if (auto* value = caf::get_if(&content, "varsync.timeout-ms")) {
    // cfg.set() and config files check the type; cfg.content can be
    // written directly, and get_or would then fall back to 30 s silently.
    auto* ms = caf::get_if<int64_t>(value);
    if (ms == nullptr || *ms <= 0)
      return make_error(errc::invalid_argument,
                        "varsync.timeout-ms must be a positive integer");
    out.timeout = std::chrono::milliseconds{*ms};
  }
  if (auto* value = caf::get_if(&content, "varsync.memory-budget-mb")) {
    // At most 2^44 MiB (16 EiB), so that the bytes fit 64 bits.
    auto* mb = caf::get_if<int64_t>(value);
    if (mb == nullptr || *mb < 0 || *mb > (int64_t{1} << 44) - 1)
      return make_error(errc::invalid_argument,
                        "varsync.memory-budget-mb must be a non-negative "
                        "integer (MiB; 0: automatic)");
    out.memory_budget_bytes = static_cast<uint64_t>(*mb) << 20;
  }
  if (auto* value = caf::get_if(&content, "varsync.max-queued-operations")) {
    auto* n = caf::get_if<int64_t>(value);
    if (n == nullptr || *n <= 0)
      return make_error(errc::invalid_argument,
                        "varsync.max-queued-operations must be a positive "
                        "integer (there is no unbounded queue)");
    out.max_queued_operations = static_cast<size_t>(*n);
  }
  if (auto* value = caf::get_if(&content, "varsync.max-queued-mb")) {
    // At most 2^24 MiB (16 TiB): the bound in bytes must not overflow.
    auto* mb = caf::get_if<int64_t>(value);
    if (mb == nullptr || *mb <= 0 || *mb > (int64_t{1} << 24))
      return make_error(errc::invalid_argument,
                        "varsync.max-queued-mb must be a positive integer of "
                        "at most 16777216 (there is no unbounded queue)");
    out.max_queued_bytes = static_cast<size_t>(*mb) << 20;
  }
  return out;
}

} // namespace varsync
