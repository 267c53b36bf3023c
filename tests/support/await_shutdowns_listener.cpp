// Every Catch test binary waits, at the end of its run, for the actor
// systems of the strategies its tests dropped (each is destroyed by a thread
// of its own, and a strategy released on another thread is not waited for):
// the process then never exits while one is still shutting down, as the
// library asks of a process that exits (await_strategy_shutdowns).
#define CATCH_CONFIG_EXTERNAL_INTERFACES
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdio>

#include "varsync/strategy.hpp"

namespace {

struct await_shutdowns_listener : Catch::TestEventListenerBase {
  using TestEventListenerBase::TestEventListenerBase;

  void testRunEnded(Catch::TestRunStats const&) override {
    if (!varsync::await_strategy_shutdowns(std::chrono::seconds(60)))
      std::fprintf(stderr, "a strategy's actor system was still shutting "
                           "down 60 s after the last test\n");
  }
};

} // namespace

CATCH_REGISTER_LISTENER(await_shutdowns_listener)
