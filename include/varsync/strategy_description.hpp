#pragma once
// What a strategy reports about itself: its devices, the data path it uses,
// and the operations it dispatched last (the flight recorder, M7).

#include <cstdint>
#include <string>
#include <vector>

#include <caf/meta/type_name.hpp>

namespace varsync {

/// One operation of the flight recorder (M7).
struct operation_record {
  /// This process's number for it, from 1.
  uint64_t id = 0;
  /// "update", "read", "run", ... (the operation's name).
  std::string kind;
  /// Its variable's name ("#<id>" once destroyed); empty for none.
  std::string variable;
  /// The process that issued it.
  int32_t origin = 0;
  /// Services mode: its place in the sequencer's one order where this
  /// process runs it in its turn; 0 elsewhere.
  uint64_t sequence = 0;
  /// Services mode with an arbiter (P16): the epoch of the lead that
  /// ordered it; 0 elsewhere.
  uint64_t epoch = 0;
  /// "queued" (waiting for admission, V3), "sequencing" (sent to the
  /// sequencer, not back yet), "running";
  /// across processes the stage its round passed last: "agreed" (every
  /// process issued it), "data" (the data moved), "voted" (every process
  /// can apply it); then "done" or "failed".
  std::string phase;
  /// Microseconds since it was dispatched, when the report was made.
  int64_t age_us = 0;
  /// Microseconds from dispatch to its answer; -1 while unanswered.
  int64_t duration_us = -1;
  /// Where it failed: the error.
  std::string error;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, operation_record& x) {
  return f(caf::meta::type_name("varsync::operation_record"), x.id, x.kind,
           x.variable, x.origin, x.sequence, x.epoch, x.phase, x.age_us,
           x.duration_us, x.error);
}

struct strategy_description {
  std::vector<std::string> devices;
  /// The collective that moves bulk data, e.g. "host one-pass shared memory".
  std::string collective;
  /// Host collectives completed so far (a fused step or batch counts once).
  uint64_t collectives_run = 0;
  /// One line per failed replica: "replica 1 (cpu:1): <reason>".
  std::vector<std::string> failures;
  /// Fire-and-forget local adds (local_add_atom) that the replicas did not
  /// apply: refused while overloaded, or invalid (unknown variable, ON_WRITE,
  /// a value or sum the dtype cannot hold). They have no reply; this is
  /// where they are counted (docs/actor-protocol.md).
  uint64_t local_adds_dropped = 0;
  /// This process's rank among the strategy's processes.
  int32_t process_rank = 0;
  /// The flight recorder (M7): the last operations this process
  /// dispatched, oldest first (the last 256).
  std::vector<operation_record> recent_operations;
  /// Operations dispatched in all; those before the last
  /// `recent_operations.size()` are no longer held.
  uint64_t operations_dispatched = 0;
};

/// The flight recorder's report as JSON: {"process", "dispatched",
/// "operations": [{"id", "kind", "variable", "origin", "sequence", "epoch",
/// "phase", "age_us", "duration_us", "error"}, ...]}.
std::string to_json(const strategy_description& d);

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f,
                                        strategy_description& x) {
  return f(caf::meta::type_name("varsync::strategy_description"), x.devices,
           x.collective, x.collectives_run, x.failures,
           x.local_adds_dropped, x.process_rank, x.recent_operations,
           x.operations_dispatched);
}

} // namespace varsync
