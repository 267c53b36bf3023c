#pragma once
// P16's fencing scenario, under either arbiter: three processes of a
// services-mode strategy (strategy_rank's services_fenced) and a successor
// outside it (arbiter_successor, the arbiter's rank 3) that takes the lead
// once process 0's lease ran out, wakes it, and holds the lead for 2 s.
// Every child exits 0 when the scenario holds.

#include <string>
#include <vector>

#include "spawn_processes.hpp"

namespace varsync::testing {

inline std::vector<child_spec> fenced_scenario(const std::string& arbiter,
                                               int port) {
  std::vector<child_spec> children;
  for (int r = 0; r < 3; ++r)
    children.push_back({{STRATEGY_RANK_EXE, "services_fenced", "1"},
                        {"VARSYNC_RANK=" + std::to_string(r),
                         "VARSYNC_WORLD_SIZE=3",
                         "VARSYNC_RENDEZVOUS=127.0.0.1:" + std::to_string(port),
                         "VARSYNC_TIMEOUT_MS=20000",
                         "VARSYNC_PEER_TIMEOUT_MS=1000",
                         "VARSYNC_MODE=services",
                         "VARSYNC_ARBITER=" + arbiter},
                        {}});
  children.push_back({{ARBITER_SUCCESSOR_EXE, arbiter, "3", "5000", "2000",
                       "60000"},
                      {},
                      {}});
  return children;
}

} // namespace varsync::testing
