#pragma once
// How a strategy orders its operations across processes: one object per
// mode, chosen when the coordinator starts and asked by its dispatch before
// every operation (actors/coordinator/coordinator_dispatch.cpp). Local (one process):
// run now. Training (every process issues the same operations): run now,
// one at a time, so that every process starts its rounds in one order (P4).
// Services (any process issues operations alone): hand the operation to
// process 0's sequencer and run it when it comes back in order
// (actors/coordinator/services_ordering.hpp).

#include <cstddef>
#include <memory>

#include <caf/error.hpp>
#include <caf/timespan.hpp>

#include "messages/completion.hpp"
#include "messages/operation.hpp"
#include "messages/sequenced_operation.hpp"

namespace varsync {

struct strategy_metrics;

class ordering {
public:
  /// Admitted operations that run at once where the mode allows several.
  static constexpr size_t max_in_flight = 64;

  virtual ~ordering() = default;

  /// At most this many admitted operations run at once.
  virtual size_t in_flight_limit() const = 0;

  /// Whether every process takes part in the operations this process
  /// issues (so that an operation may hold a round with the others: an
  /// all_reduce, a step's ON_WRITE updates, a collective inside a step).
  virtual bool every_process_takes_part() const = 0;

  /// Asked before `op` runs: true if the ordering took it (`done` is then
  /// answered when it ran in its turn, or failed), false to run it now.
  virtual bool take(caf::timespan timeout, operation& op, completion& done) = 0;

  /// P14: a barrier that runs now (services mode's run in their turn).
  virtual void barrier(caf::timespan timeout, reply_fn<ok_atom> done) = 0;

  /// An operation process 0 ordered (services mode; ignored elsewhere, V4).
  virtual void ordered(sequenced_operation) {}

  /// Process 0's sequencer cannot be reached (services mode).
  virtual void lost(caf::error) {}

  /// Its counts in a metrics snapshot.
  virtual void report(strategy_metrics&) const {}
};

class coordinator_state;

/// One process, or training mode (`across_processes`): then the barrier is
/// an agreement round of `coordinator`.
std::unique_ptr<ordering> make_plain_ordering(coordinator_state& coordinator,
                                              bool across_processes);

} // namespace varsync
