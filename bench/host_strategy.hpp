#pragma once
// A strategy over host replicas "cpu:0".."cpu:<n-1>" in a benchmark's actor
// system; the error printed if there is none.

#include <cstdio>
#include <optional>
#include <utility>

#include <caf/actor_system.hpp>

#include "bench/caf_setup.hpp"
#include "varsync/strategy.hpp"

namespace bench {

inline std::optional<varsync::strategy> host_strategy(caf::actor_system& sys,
                                                      int replicas) {
  varsync::strategy_options options;
  options.devices = host_devices(replicas);
  auto s = varsync::strategy::create(sys, options);
  if (!s) {
    std::fprintf(stderr, "%s\n", varsync::describe(s.error()).c_str());
    return std::nullopt;
  }
  return std::move(*s);
}

} // namespace bench
