#pragma once
// The one place that chooses how a strategy moves its bulk data, once, when
// the strategy is made. The coordinator then only knows whether a driver
// runs the work phase of its collectives; it never looks at device kinds.
//
//   several processes       the process collective (Gloo over TCP,
//                           sync/cross_process_collective.hpp)
//   a CUDA replica          the device collective the CUDA backend
//                           registers (NCCL clique, same-GPU copies, host
//                           staging: sync/nccl/cuda_collective.hpp)
//   host replicas only      no driver: the replicas run the one-pass
//                           shared-memory all-reduce on their slices
//                           (sync/allreduce_one_pass.hpp)

#include <optional>
#include <string>
#include <vector>

#include <caf/expected.hpp>
#include <caf/fwd.hpp>

#include "messages/collective_driver_interface.hpp"
#include "sync/process_group.hpp"
#include "varsync/device_id.hpp"

namespace varsync {

struct selected_collective {
  /// Runs the work phase of every collective for all of this process's
  /// replicas at once; none: the replicas work on their slices.
  std::optional<collective_driver_actor> driver;
  /// The choice in words (strategy descriptions, logs).
  std::string description;
};

/// Chooses (and spawns, where it has a driver) the collective of a strategy
/// over `devices`, in this process, in `processes` when it spans several.
/// invalid_argument for device replicas across processes (not built yet);
/// device_error for device replicas without the CUDA backend.
caf::expected<selected_collective>
select_collective(caf::actor_system& sys, const std::vector<device_id>& devices,
                  std::optional<process_membership> processes);

} // namespace varsync
