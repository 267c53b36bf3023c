#include <catch2/catch.hpp>

#include <chrono>
#include <limits>
#include <sstream>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/settings.hpp>

#include "varsync/error.hpp"
#include "varsync/config.hpp"
#include "varsync/strategy.hpp"

using namespace varsync;
using namespace std::chrono_literals;

namespace {

caf::actor_system_config& quiet(caf::actor_system_config& cfg) {
  register_types(cfg);
  cfg.set("scheduler.max-threads", 2);
  cfg.set("logger.verbosity", caf::atom("quiet"));
  return cfg;
}

} // namespace

TEST_CASE("config: defaults when varsync's entries are unset") {
  caf::actor_system_config cfg;
  auto s = read_config(quiet(cfg));
  REQUIRE(s);
  CHECK(s->timeout == 30000ms);
  CHECK(s->max_queued_operations == 4096);
  CHECK(s->max_queued_bytes == size_t{256} << 20);
  CHECK(s->log_level.empty());
  CHECK(s->unknown_log_level.empty());
}

TEST_CASE("config: entries set by the application are checked") {
  SECTION("valid") {
    caf::actor_system_config cfg;
    quiet(cfg).set("varsync.timeout-ms", 250);
    cfg.set("varsync.log-level", "debug");
    auto s = read_config(cfg);
    REQUIRE(s);
    CHECK(s->timeout == 250ms);
    CHECK(s->log_level == "debug");
    CHECK(s->unknown_log_level.empty());
  }
  SECTION("an unknown level name is reported, not applied") {
    caf::actor_system_config cfg;
    quiet(cfg).set("varsync.log-level", "loud");
    auto s = read_config(cfg);
    REQUIRE(s);
    CHECK(s->log_level.empty());
    CHECK(s->unknown_log_level == "loud");
  }
  SECTION("a timeout that is not a positive integer") {
    for (int variant = 0; variant < 3; ++variant) {
      caf::actor_system_config cfg;
      quiet(cfg);
      if (variant == 0)
        cfg.set("varsync.timeout-ms", 0);
      else if (variant == 1)
        cfg.set("varsync.timeout-ms", -5);
      else // cfg.set() refuses a string; content can still hold one
        caf::put(cfg.content, "varsync.timeout-ms", std::string{"250"});
      auto s = read_config(cfg);
      REQUIRE_FALSE(s);
      CHECK(has_code(s.error(), errc::invalid_argument));
    }
  }
  SECTION("overload bounds") {
    caf::actor_system_config cfg;
    quiet(cfg).set("varsync.max-queued-operations", 16);
    cfg.set("varsync.max-queued-mb", 3);
    auto s = read_config(cfg);
    REQUIRE(s);
    CHECK(s->max_queued_operations == 16);
    CHECK(s->max_queued_bytes == size_t{3} << 20);
  }
  SECTION("overload bounds that are not positive integers: there is no "
          "unbounded queue") {
    for (int variant = 0; variant < 6; ++variant) {
      caf::actor_system_config cfg;
      quiet(cfg);
      if (variant == 0)
        cfg.set("varsync.max-queued-operations", 0);
      else if (variant == 1)
        cfg.set("varsync.max-queued-operations", -3);
      else if (variant == 2)
        caf::put(cfg.content, "varsync.max-queued-operations",
                 std::string{"16"});
      else if (variant == 3)
        cfg.set("varsync.max-queued-mb", 0);
      else if (variant == 4) // would overflow the bound in bytes
        cfg.set("varsync.max-queued-mb", std::numeric_limits<int64_t>::max());
      else
        caf::put(cfg.content, "varsync.max-queued-mb", 1.5);
      auto s = read_config(cfg);
      REQUIRE_FALSE(s);
      CHECK(has_code(s.error(), errc::invalid_argument));
    }
  }
  SECTION("a log level that is not a string") {
    caf::actor_system_config cfg;
    caf::put(quiet(cfg).content, "varsync.log-level", 3);
    auto s = read_config(cfg);
    REQUIRE_FALSE(s);
    CHECK(has_code(s.error(), errc::invalid_argument));
  }
}

TEST_CASE("config: varsync.memory-budget-mb") {
  SECTION("unset: automatic") {
    caf::actor_system_config cfg;
    auto s = read_config(quiet(cfg));
    REQUIRE(s);
    CHECK(s->memory_budget_bytes == 0);
  }
  SECTION("MiB, 0 meaning automatic") {
    for (int64_t mb : {int64_t{0}, int64_t{64}, (int64_t{1} << 44) - 1}) {
      caf::actor_system_config cfg;
      quiet(cfg).set("varsync.memory-budget-mb", mb);
      auto s = read_config(cfg);
      REQUIRE(s);
      CHECK(s->memory_budget_bytes == static_cast<uint64_t>(mb) << 20);
    }
  }
  SECTION("not a non-negative integer that fits 64 bits in bytes") {
    for (int variant = 0; variant < 4; ++variant) {
      caf::actor_system_config cfg;
      quiet(cfg);
      if (variant == 0)
        cfg.set("varsync.memory-budget-mb", -1);
      else if (variant == 1)
        cfg.set("varsync.memory-budget-mb", int64_t{1} << 44);
      else if (variant == 2)
        caf::put(cfg.content, "varsync.memory-budget-mb", std::string{"64"});
      else
        caf::put(cfg.content, "varsync.memory-budget-mb", 1.5);
      auto s = read_config(cfg);
      REQUIRE_FALSE(s);
      CHECK(has_code(s.error(), errc::invalid_argument));
      CHECK(message_of(s.error()).find("varsync.memory-budget-mb")
            != std::string::npos);
    }
  }
  SECTION("from a config file") {
    caf::actor_system_config cfg;
    quiet(cfg);
    std::istringstream ini{"[varsync]\nmemory-budget-mb=128\n"};
    REQUIRE_FALSE(cfg.parse(caf::actor_system_config::string_list{}, ini));
    auto s = read_config(cfg);
    REQUIRE(s);
    CHECK(s->memory_budget_bytes == uint64_t{128} << 20);
  }
  SECTION("an invalid entry fails strategy creation") {
    caf::actor_system_config cfg;
    quiet(cfg).set("varsync.memory-budget-mb", -5);
    caf::actor_system sys{cfg};
    strategy_options options;
    options.devices = {"cpu:0"};
    auto s = strategy::create(sys, options);
    REQUIRE_FALSE(s);
    CHECK(has_code(s.error(), errc::invalid_argument));
  }
}

TEST_CASE("config: entries from a config file") {
  caf::actor_system_config cfg;
  quiet(cfg);
  std::istringstream ini{"[varsync]\ntimeout-ms=1500\nlog-level=\"info\"\n"};
  REQUIRE_FALSE(cfg.parse(caf::actor_system_config::string_list{}, ini));
  auto s = read_config(cfg);
  REQUIRE(s);
  CHECK(s->timeout == 1500ms);
  CHECK(s->log_level == "info");
}

TEST_CASE("config: an invalid timeout entry fails strategy creation") {
  caf::actor_system_config cfg;
  quiet(cfg).set("varsync.timeout-ms", -1);
  caf::actor_system sys{cfg};
  strategy_options options;
  options.devices = {"cpu:0"};
  auto s = strategy::create(sys, options);
  REQUIRE_FALSE(s);
  CHECK(has_code(s.error(), errc::invalid_argument));
}

// Timeouts far beyond any real deadline used to overflow int64 nanoseconds
// (UBSan: signed integer overflow in the chrono conversions).
TEST_CASE("config: huge timeouts mean no deadline, from options or config") {
  auto exercise = [](const strategy& s, const std::string& name) {
    auto v = s.create_variable(name, tensor::scalar<float>(1),
                               synchronization::on_write, aggregation::sum);
    REQUIRE(v);
    CHECK_FALSE(s.assign_add(*v, 2.0));
    auto value = s.read(*v);
    REQUIRE(value);
    CHECK(value->as_double() == 3.0);
  };
  SECTION("strategy_options::timeout") {
    strategy_options options;
    options.devices = {"cpu:0", "cpu:1"};
    options.scheduler_threads = 2;
    options.timeout = std::chrono::milliseconds::max();
    auto s = strategy::create(options);
    REQUIRE(s);
    exercise(*s, "a");
    exercise(s->with_timeout(std::chrono::milliseconds::max() / 2), "b");
    s->shutdown();
  }
  SECTION("varsync.timeout-ms") {
    caf::actor_system_config cfg;
    quiet(cfg).set("varsync.timeout-ms", std::numeric_limits<int64_t>::max());
    caf::actor_system sys{cfg};
    strategy_options options;
    options.devices = {"cpu:0", "cpu:1"};
    auto s = strategy::create(sys, options);
    REQUIRE(s);
    CHECK(s->timeout() == std::chrono::milliseconds::max());
    exercise(*s, "c");
    s->shutdown();
  }
}
