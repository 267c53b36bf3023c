#include "varsync/actor_api.hpp"

#include "api/strategy_access.hpp"
#include "api/strategy_core.hpp"

namespace varsync {

coordinator_actor coordinator_of(const strategy& s) {
  auto& core = detail::strategy_access::core(s);
  if (core->system_destroyed())
    return coordinator_actor{};
  return core->coordinator();
}

replica_local_actor replica_of(const strategy& s, int r) {
  auto& replicas = detail::strategy_access::core(s)->replicas();
  // Replica ids are global across processes: this process holds
  // first_local_replica() .. + num_local_replicas() - 1.
  const int local = r - s.first_local_replica();
  if (local < 0 || static_cast<size_t>(local) >= replicas.size())
    return replica_local_actor{};
  return replicas[static_cast<size_t>(local)];
}

} // namespace varsync
