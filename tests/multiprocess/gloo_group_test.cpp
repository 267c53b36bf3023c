// Multi-process tests of the Gloo transport: this process hosts the
// rendezvous store (published on loopback) and starts the ranks as child
// processes (gloo_rank), waits for them within a deadline and kills what is
// left, whatever happens (spawn_processes.hpp).

#include <catch2/catch.hpp>

#include <chrono>
#include <string>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/io/middleman.hpp>
#include <caf/send.hpp>

#include "actors/cluster/rendezvous_store_actor.hpp"
#include "spawn_processes.hpp"
#include "varsync/config.hpp"

using namespace varsync;
using namespace std::chrono_literals;

namespace {

// Runs `size` ranks against a store published on loopback; every child is
// reaped before returning.
testing::children_result run_ranks(int size, const std::string& mode,
                       std::chrono::milliseconds rank_timeout,
                       std::chrono::milliseconds deadline) {
  caf::actor_system_config cfg;
  register_types(cfg);
  cfg.load<caf::io::middleman>();
  cfg.set("scheduler.max-threads", 2);
  cfg.set("logger.verbosity", caf::atom("quiet"));
  caf::actor_system sys{cfg};
  auto store = spawn_rendezvous_store(sys);
  auto port = sys.middleman().publish(store, 0, "127.0.0.1");
  REQUIRE(port);
  std::vector<testing::child_spec> children;
  for (int r = 0; r < size; ++r)
    children.push_back({{GLOO_RANK_EXE, std::to_string(*port),
                         std::to_string(r), std::to_string(size),
                         std::to_string(rank_timeout.count()), mode},
                        {},
                        {}});
  auto out = testing::run_children(children, deadline);
  REQUIRE(out.spawned);
  caf::anon_send_exit(store, caf::exit_reason::user_shutdown);
  return out;
}

} // namespace

TEST_CASE("multiprocess: 2 and 4 processes all-reduce through Gloo with the "
          "host kernels' results") {
  for (int size : {2, 4}) {
    INFO(size << " processes");
    auto r = run_ranks(size, "reduce", 20s, 60s);
    CHECK(r.exit_codes == std::vector<int>(static_cast<size_t>(size), 0));
  }
}

TEST_CASE("multiprocess: a rank that never joins fails the others' "
          "rendezvous with timeout within the deadline") {
  auto r = run_ranks(3, "absent", 2s, 30s);
  CHECK(r.exit_codes == std::vector<int>{0, 0, 0});
  CHECK(r.took < 20s); // the 2 s deadline, not the test's 30 s
}

TEST_CASE("multiprocess: a rank that dies after joining fails the others' "
          "all_reduce with replica_failed, and nothing hangs") {
  auto r = run_ranks(3, "die", 5s, 30s);
  CHECK(r.exit_codes == std::vector<int>{0, 0, 0});
}
