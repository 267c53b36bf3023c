#pragma once
// The actor system every benchmark uses: varsync's message types, two
// scheduler threads (the development machines have 2 cores, and CAF's default
// scheduler would start 4 threads on them), CAF's logger quiet, and the
// scheduler polling strategy::create uses (varsync::tune_scheduler).

#include <string>
#include <vector>

#include <caf/actor_system_config.hpp>

#include "varsync/config.hpp"

namespace bench {

constexpr int scheduler_threads = 2;

inline void configure(caf::actor_system_config& cfg) {
  varsync::register_types(cfg);
  cfg.set("scheduler.max-threads", scheduler_threads);
  cfg.set("logger.verbosity", caf::atom("quiet"));
  varsync::tune_scheduler(cfg);
}

/// "cpu:0" .. "cpu:<n-1>".
inline std::vector<std::string> host_devices(int n) {
  std::vector<std::string> out;
  for (int r = 0; r < n; ++r)
    out.push_back("cpu:" + std::to_string(r));
  return out;
}

} // namespace bench
