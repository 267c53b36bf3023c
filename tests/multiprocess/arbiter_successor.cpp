// Stands in for the process that takes over from a stopped sequencer
// (services failover is to come): waits until a process holds the lead of
// the arbiter's file, takes it as soon as that holder's lease runs out,
// wakes the old holder (SIGCONT) and keeps the lead a while, so that the
// old holder finds itself fenced (P16).
//
//   arbiter_successor ARBITER RANK LEASE_MS HOLD_MS TIMEOUT_MS
// ARBITER as cluster_spec::arbiter names one, with its file or key.
// Exit status 0 once it took the lead from another process, 1 otherwise.

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include <signal.h>

#include "actors/cluster/arbiter.hpp"
#include "varsync/error.hpp"

using namespace varsync;
using namespace std::chrono_literals;

int main(int argc, char** argv) {
  if (argc != 6)
    return 2;
  const std::chrono::milliseconds lease{std::atoi(argv[3])};
  const std::chrono::milliseconds hold{std::atoi(argv[4])};
  const auto deadline = std::chrono::steady_clock::now()
                        + std::chrono::milliseconds{std::atoi(argv[5])};
  auto arbiter = open_arbiter(argv[1], "", std::atoi(argv[2]), lease);
  if (!arbiter) {
    std::printf("successor: %s\n", describe(arbiter.error()).c_str());
    return 1;
  }
  // The holder it takes over from (etcd drops a lapsed holder's key, so
  // the holder is remembered from while it was there).
  arbiter::lead before;
  while (std::chrono::steady_clock::now() < deadline) {
    auto lead = (*arbiter)->current();
    if (!lead) {
      std::printf("successor: %s\n", describe(lead.error()).c_str());
      return 1;
    }
    if (lead->epoch > 0 && lead->rank >= 0)
      before = *lead;
    // Never the first holder: only a take-over from one.
    if (before.epoch > 0) {
      if (auto epoch = (*arbiter)->try_acquire()) {
        std::printf("successor: took epoch %llu from process %d (pid %d)\n",
                    static_cast<unsigned long long>(*epoch), before.rank,
                    before.pid);
        std::fflush(stdout);
        kill(before.pid, SIGCONT);
        std::this_thread::sleep_for(hold);
        (*arbiter)->release(*epoch);
        return 0;
      }
    }
    std::this_thread::sleep_for(50ms);
  }
  std::printf("successor: no lead to take over before the deadline\n");
  return 1;
}
