// A CAF service that reports failures through its exit status
// (<varsync/ext/service_main.hpp>), run alone and under varsync-run by the
// tests (tests/CMakeLists.txt, tests/multiprocess/launcher_test.cpp).
//
//   service_exit --scenario=S [--path=P]
//
//   ok               creates a strategy, exits 0
//   return           caf_main returns 3
//   actor            caf_main returns 0; an actor that finishes after it
//                    records status 4 with set_exit_status
//   corrupt-restore  restores the strategy from the corrupt checkpoint P
//                    (every process, across processes): caf_main prints
//                    the error and returns 1
//   killed           the last process kills itself with SIGKILL once the
//                    strategy is made; the others wait 60 s, then exit 0
//
// Across processes when started by varsync-run (cluster_from_environment).

#include <chrono>
#include <csignal>
#include <cstdio>
#include <string>
#include <thread>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/send.hpp>

#include <varsync/actor_api.hpp>
#include <varsync/checkpoint.hpp>
#include <varsync/ext/service_main.hpp>
#include <varsync/varsync.hpp>

using namespace varsync;

namespace {

struct config : caf::actor_system_config {
  config() {
    register_types(*this);
    opt_group{custom_options_, "global"}
      .add(scenario, "scenario", "ok, return, actor, corrupt-restore, killed")
      .add(path, "path", "the checkpoint of corrupt-restore");
  }
  std::string scenario;
  std::string path;
};

caf::expected<strategy> make_strategy(caf::actor_system& sys) {
  strategy_options opts;
  opts.devices = {"cpu:0"};
  auto cluster = cluster_from_environment();
  if (!cluster)
    return std::move(cluster.error());
  opts.cluster = *cluster;
  return strategy::create(sys, opts);
}

// Records `status` when told to finish, after caf_main has returned. It takes
// an argument because CAF 0.17 binds a null reference when spawning a function
// without any (UBSan reports it).
caf::behavior late_failure(caf::event_based_actor* self, int status) {
  return {
    [self, status](ok_atom) {
      set_exit_status(status);
      self->quit();
    },
  };
}

} // namespace

int caf_main(caf::actor_system& sys, const config& cfg) {
  if (cfg.scenario == "return")
    return 3;
  if (cfg.scenario == "actor") {
    auto a = sys.spawn(late_failure, 4);
    caf::anon_send(a, ok_atom::value);
    return 0;
  }
  auto s = make_strategy(sys);
  if (!s) {
    std::fprintf(stderr, "service_exit: %s\n", describe(s.error()).c_str());
    return 2;
  }
  const int rank = s->process_rank();
  if (cfg.scenario == "ok")
    return 0;
  if (cfg.scenario == "corrupt-restore") {
    auto w = s->create_variable("w", tensor::scalar<float>(1),
                                synchronization::on_write, aggregation::sum);
    if (!w)
      return 2;
    if (auto err = restore(*s, cfg.path)) {
      std::fprintf(stderr, "service_exit: rank %d: restore failed: %s\n", rank,
                   describe(err).c_str());
      return 1;
    }
    return 0;
  }
  if (cfg.scenario == "killed") {
    if (rank == s->num_processes() - 1)
      std::raise(SIGKILL);
    std::this_thread::sleep_for(std::chrono::seconds(60));
    return 0;
  }
  std::fprintf(stderr, "service_exit: unknown scenario '%s'\n",
               cfg.scenario.c_str());
  return 2;
}

VARSYNC_MAIN()
