// Multi-process tests of the Gloo transport: this process hosts the
// rendezvous store (published on loopback) and starts the ranks as child
// processes (gloo_rank), waits for them within a deadline and kills what is
// left, whatever happens.

#include <catch2/catch.hpp>

#include <chrono>
#include <csignal>
#include <string>
#include <thread>
#include <vector>

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/io/middleman.hpp>
#include <caf/send.hpp>

#include "actors/gloo/rendezvous_store_actor.hpp"
#include "varsync/config.hpp"

extern char** environ;

using namespace varsync;
using namespace std::chrono_literals;

namespace {

struct ranks_result {
  std::vector<int> exit_codes; // -1: killed at the deadline
  std::chrono::milliseconds took{0};
};

// Runs `size` ranks against a store published on loopback; every child is
// reaped before returning.
ranks_result run_ranks(int size, const std::string& mode,
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
  std::vector<pid_t> pids;
  for (int r = 0; r < size; ++r) {
    std::vector<std::string> args{GLOO_RANK_EXE, std::to_string(*port),
                                  std::to_string(r), std::to_string(size),
                                  std::to_string(rank_timeout.count()), mode};
    std::vector<char*> argv;
    for (auto& a : args)
      argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_t pid = 0;
    REQUIRE(posix_spawn(&pid, GLOO_RANK_EXE, nullptr, nullptr, argv.data(),
                        environ)
            == 0);
    pids.push_back(pid);
  }
  ranks_result out;
  out.exit_codes.assign(static_cast<size_t>(size), -1);
  auto start = std::chrono::steady_clock::now();
  size_t left = pids.size();
  while (left > 0 && std::chrono::steady_clock::now() - start < deadline) {
    for (size_t i = 0; i < pids.size(); ++i) {
      if (pids[i] == 0)
        continue;
      int status = 0;
      if (waitpid(pids[i], &status, WNOHANG) == pids[i]) {
        out.exit_codes[i] = WIFEXITED(status) ? WEXITSTATUS(status) : -2;
        pids[i] = 0;
        --left;
      }
    }
    std::this_thread::sleep_for(10ms);
  }
  for (auto pid : pids)
    if (pid != 0) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
  out.took = std::chrono::duration_cast<std::chrono::milliseconds>(
    std::chrono::steady_clock::now() - start);
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
