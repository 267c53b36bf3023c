#pragma once
// What the examples that run across processes share: their replicas, in
// all, spread over the processes a launcher started (varsync-run, torchrun,
// mpirun, srun), or all in this process when none did.

#include <cstdio>
#include <cstdlib>
#include <string>

#include "varsync/cluster_spec.hpp"
#include "varsync/error.hpp"
#include "varsync/strategy.hpp"

namespace examples {

/// Sets opts.cluster from the environment and opts.devices to this
/// process's share of `total_replicas` host replicas (cpu:0, cpu:1, ...).
/// Exits with a message when the environment is bad or the replicas do not
/// split evenly over the processes.
inline void spread_replicas(varsync::strategy_options& opts,
                            int total_replicas) {
  auto cluster = varsync::cluster_from_environment();
  if (!cluster) {
    std::printf("FAILED  read the cluster: %s\n",
                varsync::describe(cluster.error()).c_str());
    std::fflush(stdout);
    std::_Exit(1);
  }
  int local = total_replicas;
  if (*cluster && (*cluster)->world_size > 1) {
    const int processes = (*cluster)->world_size;
    if (total_replicas % processes != 0) {
      std::printf("FAILED  %d replicas do not split over %d processes\n",
                  total_replicas, processes);
      std::fflush(stdout);
      std::_Exit(1);
    }
    local = total_replicas / processes;
    opts.cluster = **cluster;
  }
  opts.devices.clear();
  for (int i = 0; i < local; ++i)
    opts.devices.push_back("cpu:" + std::to_string(i));
}

} // namespace examples
