#pragma once
// The collective of a strategy whose replicas live in several processes: the
// plan's items are reduced over this process's replicas, then over the
// processes through the process group, then applied to this process's
// components (or written to the output). Every process runs the same
// sequence of these; each run starts with an agreement round, so that a
// process that issued a different operation, or failed its part, fails the
// operation on every process with the rank and the operation named, before
// any data moves. Blocking (the group's calls): the driver runs it
// (collective_workers::driver), on a thread of its own.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <memory>

#include <caf/error.hpp>

#include "sync/collective_algorithm.hpp"
#include "sync/process_group.hpp"

namespace varsync {

/// What the processes exchange through the group besides the data: the
/// agreement before any data moves, the vote before any component
/// changes. Fixed-size and checked on receipt (a record a process cannot
/// have meant fails the operation with replica_failed).
namespace cross_process_wire {

struct agreement_record {
  uint64_t fingerprint = 0;
  uint32_t code = 0; // errc of a local failure, 0: ready
  /// Microseconds since this process's previous round ended (M4).
  uint32_t busy_micros = 0;
  char text[240] = {}; // the local error's message, else the description
};
static_assert(sizeof(agreement_record) == 256);

struct vote_record {
  int32_t kind = 0; // vote_kind
  int32_t item = -1;
  int64_t element = -1;
};

enum vote_kind : int32_t {
  vote_ok = 0,
  vote_local_overflow, // the reduction over this process's replicas
  vote_apply_overflow, // applying the result to a component here
  vote_unequal,        // aggregation none: this process's value differs
};

/// The agreement round's message: the record, followed by a fixed-size
/// payload area that small floating plans fill with this process's partial
/// results (one round instead of two), so that the round has the same size
/// on every process whatever each one issued.
constexpr size_t small_payload_limit = 4096;

struct agreement_message {
  agreement_record record;
  // Items of every dtype are read in place: 8-byte aligned.
  alignas(8) std::byte payload[small_payload_limit];
};

} // namespace cross_process_wire

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

/// The agreement round alone (the first round of run_cross_process): every
/// process states the plan it is about to run, or its local failure
/// (`local`, else the plan's local_error). An error names the process that
/// failed or differs; nothing moved. For algorithms that move the data
/// another way once the processes agree.
caf::error agree_across_processes(const collective_plan& plan,
                                  process_group& group,
                                  const caf::error& local = {});

/// A commit vote after data moved another way, before anything is applied:
/// every process says whether it can apply (`local`: its own error, none
/// if it can). The result: this process's error, else the first other
/// process's (with its code, naming it and `what`), else none; the group's
/// own failure is replica_failed.
caf::error vote_across_processes(const caf::error& local, process_group& group,
                                 const std::string& what);

/// The fingerprint the processes compare: the description and every item's
/// dtype, size and operations (not variable ids, which are per process).
uint64_t fingerprint_of(const collective_plan& plan);

/// A fingerprint of `bytes` bytes of data (values the processes must agree
/// on, such as a cross-replica assign's value).
uint64_t fingerprint_of_bytes(const void* data, size_t bytes);

} // namespace varsync
