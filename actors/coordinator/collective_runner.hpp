#pragma once
// The coordinator's collective runner: collectives run one at a time, in
// the order they were started; one that waits for the one before it keeps
// its deadline running. A collective enters the replicas (they quiesce and
// vote on the equality of contributions), works (the replicas' slices, or
// the collective's driver for all of them) and leaves; a small step's plan
// (sync/collectives/small_step.hpp) is combined here and applied by the replicas in one
// round. Across processes a round that fails here still takes part, so
// that every process fails or proceeds alike.

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <caf/error.hpp>
#include <caf/timespan.hpp>

#include "actors/collective_selection.hpp"
#include "actors/coordinator/coordinator_metrics.hpp"
#include "actors/coordinator/replica_set.hpp"
#include "messages/collective.hpp"
#include "messages/completion.hpp"
#include "messages/coordinator_interface.hpp"
#include "sync/collectives/collective_plan.hpp"

namespace varsync {

class collective_runner {
public:
  using self_pointer = coordinator_internal_actor::pointer;

  /// What the runner needs from the coordinator: its checks.
  class link {
  public:
    /// A failed replica's error, if one has failed.
    virtual caf::error check_replicas() const = 0;
    /// W4: the error of the first unequal vote, or none.
    virtual caf::error unequal_vote(const std::vector<int64_t>& votes,
                                    const collective_plan& plan)
      = 0;
    /// 'name' of variable `id` for error messages.
    virtual std::string quoted_name_of(uint64_t id) const = 0;

  protected:
    ~link() = default;
  };

  /// `record` counts and times the collectives (M1).
  collective_runner(self_pointer self, replica_set& replicas,
                    const selected_collective& collective, link& owner,
                    coordinator_record& record)
    : self_(self), replicas_(replicas), collective_(collective),
      owner_(owner), record_(record) {
    // nop
  }

  collective_runner(const collective_runner&) = delete;
  collective_runner& operator=(const collective_runner&) = delete;

  /// Runs `plan` once the collectives started before it are done (`small`:
  /// a small step's plan).
  void run(caf::timespan timeout, std::shared_ptr<collective_plan> plan,
           reply_fn<ok_atom> done, bool small = false);

  /// Metrics: the collectives that completed.
  uint64_t completed() const { return completed_; }

private:
  void start(caf::timespan timeout, std::shared_ptr<collective_plan> plan,
             reply_fn<ok_atom> done, bool small);
  void start_collective(caf::timespan timeout,
                        std::shared_ptr<collective_plan> plan,
                        reply_fn<ok_atom> done);
  void start_small_step(caf::timespan timeout,
                        std::shared_ptr<collective_plan> plan,
                        reply_fn<ok_atom> done);
  /// The votes came in: the work phase runs, or the collective fails.
  void voted(const collective_run_ptr& run, caf::error failed,
             const reply_fn<ok_atom>& leave_and_finish);
  /// The collective's driver runs the work phase for every replica.
  void drive(const collective_run_ptr& run, reply_fn<ok_atom> then);
  /// `done` wrapped to count a completed collective and start the next.
  reply_fn<ok_atom> finishing(std::shared_ptr<collective_plan> plan,
                              reply_fn<ok_atom> done);
  void finish();

  self_pointer self_;
  replica_set& replicas_;
  const selected_collective& collective_;
  link& owner_;
  coordinator_record& record_;
  bool running_ = false;
  uint64_t completed_ = 0;
  /// Collectives waiting for the one running.
  std::deque<std::function<void()>> pending_;
};

} // namespace varsync
