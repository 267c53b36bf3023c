#pragma once
// The collective across processes for a strategy whose replicas in this
// process include device (CUDA) replicas: the data those replicas hold is
// staged through host memory and the processes reduce it over the process
// group exactly as host replicas' (sync/collectives/across_processes.hpp):
//
//   1. each device replica's stream is ordered after its last step (its
//      step-done event), then its inputs (staged contributions, components
//      that are read) and the components that are written are copied to
//      host memory;
//   2. run_cross_process on the host copies: agreement, reductions over
//      this process and over the processes, votes, apply to the copies;
//   3. only when every process applied: the written copies go back to
//      their devices.
//
// So every rule holds as with host replicas (the host kernels compute
// every value, bit for bit), at the price of two host copies per device
// component and step. Errors: those of run_cross_process (nothing changed
// anywhere); a copy back that fails is a device_error, with the components
// before it updated. Blocking: run by the driver.

#include <memory>
#include <vector>

#include "devices/device.hpp"
#include "sync/collectives/collective_algorithm.hpp"
#include "sync/transport/process_group.hpp"

namespace varsync {

/// `devices`: one per local replica, in slot order: the object the
/// algorithm copies that replica's memory through (its own, on the same
/// device as the replica's), or null for a replica in host memory.
std::shared_ptr<collective_algorithm>
make_staged_across_processes(process_membership membership,
                             std::vector<std::unique_ptr<device>> devices);

} // namespace varsync
