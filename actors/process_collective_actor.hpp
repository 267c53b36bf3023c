#pragma once
// The collective driver of a strategy whose replicas live in several
// processes: one actor on a thread of its own (the process group's calls
// block) that runs every collective of this process's coordinator across
// the processes, in the order the coordinator sends them
// (sync/cross_process_collective.hpp).

#include <caf/fwd.hpp>

#include "actors/collective_driver.hpp"
#include "sync/process_group.hpp"

namespace varsync {

collective_driver spawn_process_collective(caf::actor_system& sys,
                                           process_membership membership);

} // namespace varsync
