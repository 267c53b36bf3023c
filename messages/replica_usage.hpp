#pragma once
// A replica's counts for a metrics snapshot (M1, M3): replica-context reads
// and updates per component, and its admission queue.

#include <cstdint>
#include <vector>

#include <caf/meta/load_callback.hpp>
#include <caf/meta/type_name.hpp>
#include <caf/sec.hpp>

namespace varsync {

struct replica_usage {
  /// Parallel: component ids and their replica-context reads and updates.
  std::vector<uint64_t> ids;
  std::vector<uint64_t> reads;
  std::vector<uint64_t> updates;
  /// Requests held back now, and refused as overloaded since creation.
  uint64_t deferred = 0;
  uint64_t refusals = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, replica_usage& x) {
  auto load = caf::meta::load_callback([&]() -> caf::error {
    if (x.reads.size() != x.ids.size() || x.updates.size() != x.ids.size())
      return caf::sec::invalid_argument;
    return caf::none;
  });
  return f(caf::meta::type_name("varsync::replica_usage"), x.ids, x.reads,
           x.updates, x.deferred, x.refusals, load);
}

} // namespace varsync
