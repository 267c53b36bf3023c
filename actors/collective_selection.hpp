#pragma once
// The one place that chooses how a strategy moves its bulk data, once, when
// the strategy is made (sync/collectives/collective_algorithm.hpp lists the algorithms).
// The coordinator then only runs the chosen algorithm's phases; it never
// looks at device kinds.
//
//   several processes       across_processes (Gloo over TCP below it);
//                           with device replicas here, the CUDA backend's
//                           choice (NCCL across processes for floating step
//                           updates, the rest staged through host memory)
//   a CUDA replica          the device collective the CUDA backend
//                           registers (it picks NCCL clique, same GPU or
//                           host staging from the device list)
//   host replicas only      one_pass_shared_memory, run by the replicas

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <caf/expected.hpp>
#include <caf/fwd.hpp>

#include "messages/collective_driver_interface.hpp"
#include "sync/collectives/collective_algorithm.hpp"
#include "sync/transport/process_group.hpp"
#include "varsync/device_id.hpp"

namespace varsync {

struct selected_collective {
  /// collective_workers::replicas: the algorithm every collective's run
  /// hands to the replicas. Null where a driver owns it.
  std::shared_ptr<collective_algorithm> in_replicas;
  /// collective_workers::driver: the actor that runs the algorithm.
  std::optional<collective_driver_actor> driver;
  /// The choice in words (strategy descriptions, logs).
  std::string description;
  /// The algorithm reads contributions the replicas kept in staging buffers
  /// (device memory), which the replicas release after each step.
  bool uses_staging_buffers = false;
  /// It checks V4 and W4 on device contributions
  /// (collective_algorithm::checks_device_contributions).
  bool checks_device_contributions = false;
};

/// Chooses the collective of a strategy over `devices`, in this process,
/// in `processes` when it spans several, and spawns its driver where it has
/// one (hidden: spawn_maybe_hidden). device_error for device replicas
/// without the CUDA backend.
caf::expected<selected_collective>
select_collective(caf::actor_system& sys, const std::vector<device_id>& devices,
                  std::optional<process_membership> processes,
                  bool hidden = false);

} // namespace varsync
