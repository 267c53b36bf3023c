#include "actors/collective_selection.hpp"

#include "actors/collective_driver_actor.hpp"
#include "core/logging.hpp"
#include "sync/collectives/across_processes.hpp"
#include "sync/collectives/one_pass_shared_memory.hpp"
#include "sync/collectives/device_collective_registry.hpp"
#include "varsync/error.hpp"

namespace varsync {

namespace {

caf::expected<std::shared_ptr<collective_algorithm>>
choose(const std::vector<device_id>& devices,
       std::optional<process_membership> processes) {
  if (processes) {
    if (!needs_device_collective(devices))
      return make_across_processes(std::move(*processes));
    return make_device_collective(std::move(*processes), devices);
  }
  if (needs_device_collective(devices))
    return make_device_collective(devices);
  return make_one_pass_shared_memory(static_cast<int>(devices.size()));
}

} // namespace

caf::expected<selected_collective>
select_collective(caf::actor_system& sys, const std::vector<device_id>& devices,
                  std::optional<process_membership> processes, bool hidden) {
  auto algorithm = choose(devices, std::move(processes));
  if (!algorithm)
    return std::move(algorithm.error());
  selected_collective out;
  out.description = (*algorithm)->description();
  out.uses_staging_buffers = (*algorithm)->uses_staging_buffers();
  out.checks_device_contributions
    = (*algorithm)->checks_device_contributions();
  if ((*algorithm)->workers() == collective_workers::driver) {
    out.driver = spawn_collective_driver(sys, std::move(*algorithm), hidden);
    log()->info("collective: {}", out.description);
  } else {
    out.in_replicas = std::move(*algorithm);
  }
  return out;
}

} // namespace varsync
