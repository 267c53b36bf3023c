#pragma once
// The collective of a strategy whose replicas live in several processes: the
// plan's items are reduced over this process's replicas, then over the
// processes through the process group, then applied to this process's
// components (or written to the output). Every process runs the same
// sequence of these; each run starts with an agreement round
// (sync/collectives/agreement.hpp), so that a process that issued a
// different operation, or failed its part, fails the operation on every
// process with the rank and the operation named, before any data moves. Blocking (the group's calls): the driver runs it
// (collective_workers::driver), on a thread of its own.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <memory>

#include <caf/error.hpp>

#include "sync/collectives/collective_algorithm.hpp"
#include "sync/collectives/agreement.hpp"
#include "sync/transport/process_group.hpp"

namespace varsync {

/// Runs `plan` over `buffers` across the group (`replicas_per_rank`: the
/// replicas of each process, in rank order). The
/// plan's local_error, or an empty item list, makes it an agreement round
/// only. Errors: mismatched_replica_updates when the processes issued
/// different operations or aggregation none's values differ between them
/// (W4); overflow for an integer result that does not fit (V4); the code a
/// failing process reported; replica_failed when the group fails. On any
/// error no component of any process was changed, except for a group that
/// failed while results were being applied (a process that died mid-way).
caf::error run_cross_process(const collective_plan& plan,
                             collective_buffers& buffers, process_group& group,
                             const std::vector<int>& replicas_per_rank);

/// The algorithm of a strategy across the processes of `membership`
/// (run_cross_process on its group). The group closes with the algorithm.
std::shared_ptr<collective_algorithm>
make_across_processes(process_membership membership);

} // namespace varsync
