#include "actors/collective_selection.hpp"

#include "actors/collective_driver.hpp"
#include "actors/process_collective_actor.hpp"
#include "sync/collective_path.hpp"
#include "varsync/error.hpp"

namespace varsync {

caf::expected<selected_collective>
select_collective(caf::actor_system& sys, const std::vector<device_id>& devices,
                  std::optional<process_membership> processes) {
  if (processes) {
    for (auto& d : devices)
      if (d.kind != device_kind::host)
        return make_error(errc::invalid_argument,
                          "device " + to_string(d)
                            + ": a strategy across processes has host "
                              "replicas only for now (NCCL across processes "
                              "is not built yet)");
    auto d = spawn_process_collective(sys, std::move(*processes));
    return selected_collective{d.actor, std::move(d.description)};
  }
  if (needs_device_collective(devices)) {
    auto d = spawn_device_collective_driver(sys, devices);
    if (!d)
      return std::move(d.error());
    return selected_collective{d->actor, std::move(d->description)};
  }
  return selected_collective{std::nullopt, describe_collective(devices)};
}

} // namespace varsync
