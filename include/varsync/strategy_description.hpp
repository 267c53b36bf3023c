#pragma once
// What a strategy reports about itself: its devices and the data path it uses.

#include <cstdint>
#include <string>
#include <vector>

#include <caf/meta/type_name.hpp>

namespace varsync {

struct strategy_description {
  std::vector<std::string> devices;
  /// The collective that moves bulk data, e.g. "host one-pass shared memory".
  std::string collective;
  /// Host collectives completed so far (a fused step or batch counts once).
  uint64_t collectives_run = 0;
  /// One line per failed replica: "replica 1 (cpu:1): <reason>".
  std::vector<std::string> failures;
  /// Fire-and-forget local adds (local_add_atom) that the replicas did not
  /// apply: refused while overloaded, or invalid (unknown variable, ON_WRITE,
  /// a value or sum the dtype cannot hold). They have no reply; this is
  /// where they are counted (docs/actor-protocol.md).
  uint64_t local_adds_dropped = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f,
                                        strategy_description& x) {
  return f(caf::meta::type_name("varsync::strategy_description"), x.devices,
           x.collective, x.collectives_run, x.failures,
           x.local_adds_dropped);
}

} // namespace varsync
