#pragma once
// The agreement round of the processes of a strategy, a step of its own:
// every process states the operation it is about to run (a fingerprint of
// its plan) or its local failure, and every process learns whether they all
// agree before any data moves. The collective across processes starts with
// it (run_cross_process), NCCL across processes runs it before moving data
// its own way, and the coordinator runs it alone for the outcomes the
// processes must share (a training step, a checkpoint: an agreement plan
// with no items). Also the commit vote (every process says whether it can
// apply) and the fingerprints the processes compare. Blocking (the group's
// calls), on the thread that runs the group's collectives.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <caf/error.hpp>

#include "sync/collectives/collective_plan.hpp"
#include "varsync/internal/by_value.hpp"
#include "sync/transport/process_group.hpp"

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
/// on every process whatever each one issued. Its size is the by-value
/// rule's (varsync/internal/by_value.hpp).
constexpr size_t small_payload_limit = by_value_bytes;

struct agreement_message {
  agreement_record record;
  // Items of every dtype are read in place: 8-byte aligned.
  alignas(8) std::byte payload[small_payload_limit];
};

} // namespace cross_process_wire

/// The agreement round: this process's record (the plan's fingerprint, or
/// `local` as its failure) and `payload` (at most small_payload_limit
/// bytes: the small path's partial results, else empty) against every
/// other process's. `all` receives every process's message, in rank order.
/// Errors: `local`; the code a failing process reported, naming it;
/// mismatched_replica_updates when the fingerprints differ; replica_failed
/// for a record no process can have meant or when the group fails. Nothing
/// moved on any error. Records who kept whom waiting (group.rounds()).
caf::error
agreement_round(const collective_plan& plan, process_group& group,
                std::span<const std::byte> payload,
                std::vector<cross_process_wire::agreement_message>& all,
                const caf::error& local);

/// The agreement round alone: every process states the plan it is about to
/// run, or its local failure (`local`, else the plan's local_error). An
/// error names the process that failed or differs; nothing moved. For
/// algorithms that move the data another way once the processes agree.
caf::error agree_across_processes(const collective_plan& plan,
                                  process_group& group,
                                  const caf::error& local = {});

/// The agreement round of a plan with no items and a statement
/// (plan.stated): as agree_across_processes, and once every process agrees,
/// plan.stated->all holds what each stated, in rank order.
caf::error agree_stating(const collective_plan& plan, process_group& group);

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
