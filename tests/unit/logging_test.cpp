#include <catch2/catch.hpp>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>

#include "core/logging.hpp"
#include "varsync/config.hpp"
#include "varsync/strategy.hpp"

using namespace varsync;

TEST_CASE("logging: quiet by default, level settable by name") {
  if (std::getenv("VARSYNC_LOG_LEVEL") == nullptr)
    CHECK(log()->level() == spdlog::level::warn);
  CHECK(set_log_level("debug"));
  CHECK(log()->level() == spdlog::level::debug);
  CHECK_FALSE(set_log_level("loud"));
  CHECK(log()->level() == spdlog::level::debug);
  CHECK(set_log_level("warn"));
}

TEST_CASE("logging: the level comes from the actor system config") {
  caf::actor_system_config cfg;
  register_types(cfg);
  cfg.set("scheduler.max-threads", 2);
  cfg.set("logger.verbosity", caf::atom("quiet"));
  cfg.set("varsync.log-level", "error");
  caf::actor_system sys{cfg};
  strategy_options options;
  options.devices = {"cpu:0"};
  auto s = strategy::create(sys, options);
  REQUIRE(s);
  CHECK(log()->level() == spdlog::level::err);
  s->shutdown();
  set_log_level("warn");
}
