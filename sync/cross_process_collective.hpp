#pragma once
// The collective of a strategy whose replicas live in several processes: the
// plan's items are reduced over this process's replicas, then over the
// processes through the process group, then applied to this process's
// components (or written to the output). Every process runs the same
// sequence of these; each run starts with an agreement round, so that a
// process that issued a different operation, or failed its part, fails the
// operation on every process with the rank and the operation named, before
// any data moves. Blocking (the group's calls): run from the process
// collective actor's own thread.

#include <cstdint>
#include <string>
#include <vector>

#include <caf/error.hpp>

#include "sync/collective_plan.hpp"
#include "sync/process_group.hpp"

namespace varsync {

/// Runs `plan` across the group (`replicas_per_rank`: the replicas of each
/// process, in rank order). The
/// plan's local_error, or an empty item list, makes it an agreement round
/// only. Errors: mismatched_replica_updates when the processes issued
/// different operations or aggregation none's values differ between them
/// (W4); overflow for an integer result that does not fit (V4); the code a
/// failing process reported; replica_failed when the group fails. On any
/// error no component of any process was changed, except for a group that
/// failed while results were being applied (a process that died mid-way).
caf::error run_cross_process(collective_plan& plan, process_group& group,
                             const std::vector<int>& replicas_per_rank);

/// The fingerprint the processes compare: the description and every item's
/// dtype, size and operations (not variable ids, which are per process).
uint64_t fingerprint_of(const collective_plan& plan);

/// A fingerprint of `bytes` bytes of data (values the processes must agree
/// on, such as a cross-replica assign's value).
uint64_t fingerprint_of_bytes(const void* data, size_t bytes);

} // namespace varsync
