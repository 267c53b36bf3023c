#include "varsync/actor_api.hpp"

#include "api/strategy_core.hpp"

namespace varsync {

coordinator_actor coordinator_of(const strategy& s) {
  return s.core()->coordinator();
}

replica_local_actor replica_of(const strategy& s, int r) {
  auto& replicas = s.core()->replicas();
  if (r < 0 || static_cast<size_t>(r) >= replicas.size())
    return replica_local_actor{};
  return replicas[static_cast<size_t>(r)];
}

} // namespace varsync
