#pragma once
// The coordinator's step driver: a replica step's rounds. The replicas run
// the user's step and report; a coroutine step that waits at a collective
// (X1-X5) has it run and resumes with the result, round after round, until
// every replica has ended the step; then the step's updates are applied as
// one collective. A failure at any round abandons the step on every replica
// and, across processes, is agreed so that every process fails alike.

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <caf/error.hpp>
#include <caf/expected.hpp>
#include <caf/timespan.hpp>

#include "actors/coordinator/coordinator_metrics.hpp"
#include "actors/coordinator/operation_deadlines.hpp"
#include "actors/coordinator/replica_set.hpp"
#include "messages/completion.hpp"
#include "messages/coordinator_interface.hpp"
#include "varsync/tensor.hpp"

namespace varsync {

class step_driver {
public:
  /// What the driver needs from the coordinator: the checks every
  /// operation makes, and the stages after the replicas answered.
  class link {
  public:
    virtual caf::expected<caf::timespan> remaining(caf::timespan timeout,
                                                   const char* what) const
      = 0;
    virtual caf::error check_replicas() const = 0;
    /// The outcome every process shares (training mode), else `local`.
    virtual void agree_outcome(caf::timespan timeout, std::string what,
                               caf::error local, reply_fn<ok_atom> done)
      = 0;
    /// X2: the collective the replicas wait at, checked to match.
    virtual caf::error check_step_collectives(
      const std::vector<step_report>& reports) const
      = 0;
    /// The collective every replica waits at: its result for all of them.
    virtual void run_step_collective(caf::timespan timeout,
                                     std::vector<step_report>& reports,
                                     reply_fn<std::vector<tensor>> done)
      = 0;
    /// M7: the flight recorder entry of the operation being dispatched
    /// (0: none); `exchange_flight` makes `entry` that operation and
    /// returns the one before, so that a step's later rounds are its own.
    virtual uint64_t flight_now() const = 0;
    virtual uint64_t exchange_flight(uint64_t entry) = 0;
    /// Every replica ended step `seq` (it waited `waited` for the slowest):
    /// its updates are applied.
    virtual void finish_step(caf::timespan timeout,
                             std::vector<step_report>& reports, uint64_t seq,
                             caf::timespan waited, reply_fn<ok_atom> done)
      = 0;

  protected:
    ~link() = default;
  };

  /// `replicas`: those that run each step; `record`: times its rounds
  /// (M2, M4); `staging`: whether the replicas keep contributions in
  /// staging buffers until a step is released.
  step_driver(link& owner, replica_set& replicas, coordinator_record& record,
              bool staging)
    : owner_(owner), replicas_(replicas), record_(record), staging_(staging) {
    // nop
  }

  step_driver(const step_driver&) = delete;
  step_driver& operator=(const step_driver&) = delete;

  /// Runs `step` on every replica of this process.
  void run(caf::timespan timeout, replica_step_ptr step,
           reply_fn<ok_atom> done);

  /// Metrics: the steps started.
  uint64_t started() const { return started_; }

private:
  /// A step's progress: its number and its deadline (a step may take
  /// several rounds, one per collective inside it).
  struct round {
    uint64_t seq = 0;
    caf::timespan timeout{};
    operation_deadlines::clock::time_point started{};
    /// How long the first replica to answer waited for the last, over the
    /// step's rounds so far (M2).
    caf::timespan waited{0};
    /// Its flight recorder entry (M7; 0: none).
    uint64_t flight = 0;
    /// What is left of the step's deadline (negative once past it).
    caf::timespan left() const;
  };

  /// The replicas answered step `r.seq` (or its last collective): the
  /// step ends, or its collective runs and the replicas go on.
  void answered(round r, caf::expected<std::vector<step_report>> reports,
                reply_fn<ok_atom> done);
  void answered_in_flight(round r,
                          caf::expected<std::vector<step_report>> reports,
                          reply_fn<ok_atom> done);
  /// The collective's result: the replicas resume the step.
  void resume(round r, std::vector<tensor> result, reply_fn<ok_atom> done);
  std::shared_ptr<reply_times> new_times() const;

  link& owner_;
  replica_set& replicas_;
  coordinator_record& record_;
  const bool staging_;
  /// The number of the last step sent to the replicas.
  uint64_t started_ = 0;
  /// How long the last step's first round took (unknown: max). A round
  /// shorter than `spread_above` sends the next step to the replicas in
  /// turn on the coordinator's thread: its user code is cheaper than
  /// waking another thread for it.
  caf::timespan last_round_ = caf::timespan::max();
  static constexpr caf::timespan spread_above = std::chrono::microseconds(20);
};

} // namespace varsync
