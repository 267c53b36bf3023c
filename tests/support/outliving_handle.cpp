// A program whose strategy lives in an actor system of its own making, run
// by tests/reliability/system_lifetime_test.cpp in a process of its own
// (a hang must not take the test runner with it).
//   outliving_handle held     the handle outlives the actor system: the
//                             system's destruction stops the strategy (an
//                             error in the log), later calls fail with
//                             shut_down, dropping the handle returns
//   outliving_handle dropped  the handle goes first: the system's
//                             destruction still waits until every actor of
//                             the strategy has stopped
// Exits 0 when the program saw what it expects, 1 otherwise.

#include <atomic>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include <caf/abstract_actor.hpp>
#include <caf/actor_cast.hpp>
#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>

#include <varsync/actor_api.hpp>
#include <varsync/ext/checkpoint_actor.hpp>
#include <varsync/varsync.hpp>

using namespace varsync;

namespace {

int failed(const std::string& what) {
  std::printf("FAILED: %s\n", what.c_str());
  return 1;
}

// Counts the strategy's actors (coordinator and replicas) as they stop.
std::shared_ptr<std::atomic<int>> count_stops(const strategy& s) {
  auto stopped = std::make_shared<std::atomic<int>>(0);
  auto on_stop = [stopped] { ++*stopped; };
  caf::actor_cast<caf::abstract_actor*>(coordinator_of(s))
    ->attach_functor(on_stop);
  for (int r = 0; r < s.num_replicas(); ++r)
    caf::actor_cast<caf::abstract_actor*>(replica_of(s, r))
      ->attach_functor(on_stop);
  return stopped;
}

} // namespace

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "";
  if (mode != "held" && mode != "dropped")
    return failed("usage: outliving_handle held|dropped");
  caf::actor_system_config cfg;
  register_types(cfg);
  cfg.set("scheduler.max-threads", 2);
  cfg.set("logger.verbosity", caf::atom("quiet"));
  std::optional<strategy> s;
  std::optional<variable> v;
  std::shared_ptr<std::atomic<int>> stopped;
  {
    caf::actor_system sys{cfg};
    strategy_options options;
    options.devices = {"cpu:0", "cpu:1"};
    auto created = strategy::create(sys, options);
    if (!created)
      return failed(describe(created.error()));
    s = std::move(*created);
    auto x = s->create_variable("x", tensor::scalar<float>(1),
                                synchronization::on_write, aggregation::sum);
    if (!x)
      return failed(describe(x.error()));
    v = *x;
    stopped = count_stops(*s);
    if (mode == "dropped") {
      v.reset();
      s.reset();
    }
    std::printf("destroying the actor system\n");
    std::fflush(stdout);
  }
  std::printf("the actor system is gone\n");
  if (stopped->load() != 3)
    return failed("the actor system was destroyed while "
                  + std::to_string(3 - stopped->load())
                  + " actors of the strategy were running");
  if (mode == "held") {
    auto r = s->read(*v);
    if (r || !has_code(r.error(), errc::shut_down))
      return failed("a read after the actor system is gone did not fail "
                    "with shut_down");
    std::printf("read: %s\n", describe(r.error()).c_str());
    if (spawn_checkpoint_actor(*s))
      return failed("a checkpoint actor was spawned into a destroyed system");
    v.reset();
    s.reset();
  }
  std::printf("outliving_handle %s: ok\n", mode.c_str());
  return 0;
}
