#pragma once
// The actor that runs a driver-placed collective algorithm
// (collective_workers::driver: across processes, device collectives): one
// actor on a thread of its own, since its calls block (process groups,
// waits for GPUs) and the calls of all NCCL ranks must be issued from one
// place. It owns the algorithm: the group's connections, the GPUs'
// streams, scratch memory and communicators go away with its thread, not
// with the last reference to a message.

#include <memory>

#include <caf/fwd.hpp>

#include "messages/collective_driver_interface.hpp"
#include "sync/collectives/collective_algorithm.hpp"

namespace varsync {

collective_driver_actor
spawn_collective_driver(caf::actor_system& sys,
                        std::shared_ptr<collective_algorithm> algorithm,
                        bool hidden = false);

} // namespace varsync
