#pragma once
// The coordinator of a strategy: it owns the registry of variables, validates
// every request before anything changes, sequences every operation that
// involves more than one replica, and drives host collectives. It never
// touches tensor data itself: work proportional to a tensor's size happens on
// the replicas. The state is held by parts (one header each); this class
// wires them and holds the operations.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <caf/expected.hpp>
#include <caf/timespan.hpp>

#include "actors/coordinator/admission.hpp"
#include "actors/coordinator/collective_runner.hpp"
#include "actors/coordinator/coordinator_metrics.hpp"
#include "actors/coordinator/coordinator_settings.hpp"
#include "actors/coordinator/coordinator_waits.hpp"
#include "actors/coordinator/flight_dumps.hpp"
#include "actors/coordinator/flight_recorder.hpp"
#include "actors/coordinator/operation_deadlines.hpp"
#include "actors/coordinator/ordering.hpp"
#include "actors/coordinator/read_barrier.hpp"
#include "actors/coordinator/replica_set.hpp"
#include "actors/coordinator/step_driver.hpp"
#include "actors/coordinator/variable_registry.hpp"
#include "actors/coordinator/write_batcher.hpp"
#include "messages/completion.hpp"
#include "messages/coordinator_interface.hpp"
#include "sync/collectives/collective_plan.hpp"
#include "sync/policy/sync_policy.hpp"
#include "sync/scatter_update.hpp"
#include "varsync/ext/metrics.hpp"

namespace varsync {

class coordinator_state final : private replica_set::link,
                                private collective_runner::link,
                                private step_driver::link {
public:
  using self_pointer = coordinator_internal_actor::pointer;

  coordinator_state(self_pointer self, std::vector<device_id> devices,
                    std::vector<replica_actor> replicas,
                    coordinator_settings settings);

  coordinator_internal_actor::behavior_type make_behavior();
  /// Monitors the replicas (a failure is kept per replica) and binds them
  /// to this coordinator.
  void bind_replicas();

  caf::timespan default_timeout() const { return default_timeout_; }
  /// 'name' of variable `id` for error messages, or #id if it is unknown.
  std::string quoted_name_of(uint64_t id) const override;

  /// Steps up to this many contribution bytes per replica take the small
  /// path (sync/collectives/small_step.hpp); 0: never.
  const size_t small_step_bytes;
  /// Where this process stands among the strategy's (none in one process).
  const std::optional<process_layout> processes;

  /// The outcome of an operation that every process runs together in
  /// training mode (a step, a checkpoint): agree(); `local` where the
  /// issuing process runs it alone (services mode).
  void agree_outcome(caf::timespan timeout, std::string what, caf::error local,
                     reply_fn<ok_atom> done) override;

  // -- admission -------------------------------------------------------------

  /// Runs `op` now or queues it (admission.hpp); `op` must call
  /// release_slot() once when it completes.
  template <class F>
  void admit(F&& op, size_t bytes = 0) {
    admission_.admit(std::forward<F>(op), bytes);
  }
  /// V3: `overloaded` if a request of `bytes` would wait in a full queue.
  caf::error refuse_if_full(size_t bytes) const;
  void release_slot() { admission_.release(); }
  /// Runs `op`, requested at `since` (a client call): its deadline counts
  /// from the request, so time spent queued is not granted twice.
  template <class F>
  void run_requested_at(std::chrono::steady_clock::time_point since, F&& op) {
    admission_.run_requested_at(since, std::forward<F>(op));
  }
  /// Counts an operation's outcome (M1).
  template <class T>
  void count_outcome(const caf::expected<T>& r) {
    record_.outcome(r);
  }
  self_pointer self() const { return self_; }

  // -- operations; `done` runs on the coordinator's thread -------------------

  /// The one dispatch (coordinator_dispatch.cpp): runs `op` once the
  /// ordering lets it (services mode: back from the sequencer); `done`
  /// holds a reply_fn of its result. The flight recorder notes it (`from`:
  /// another process issued it; `recorded`: its entry while it queued;
  /// `done_closes`: `done` closes entry `recorded` itself, start_call's
  /// answer, and the entry is admitted already).
  void execute(caf::timespan timeout, operation&& op, completion&& done,
               std::optional<flight_recorder::origin> from = std::nullopt,
               uint64_t recorded = 0, bool done_closes = false);
  /// M7: `op`'s entry as queued if admission will queue it (0: none).
  uint64_t note_if_queued(const operation& op);
  /// M7: the entry of `op`, ordered in services mode, opened before the
  /// round that brings its data (0: not recorded); execute() continues it.
  uint64_t record_ordered(const operation& op, flight_recorder::origin from);
  /// M7: `fn` as a continuation that runs later (an answer's callback):
  /// the rounds it starts still belong to the operation dispatched now.
  template <class F>
  auto in_this_flight(F fn) {
    return [this, id = flight_now_, fn = std::move(fn)](auto&&... xs) mutable {
      const auto outer = std::exchange(flight_now_, id);
      fn(std::forward<decltype(xs)>(xs)...);
      flight_now_ = outer;
    };
  }
  /// A call of the async or blocking API, started unless its blocking
  /// caller abandoned it; `admitted`: it holds an admission slot.
  void start_call(const client_call_ptr& call, bool admitted,
                  uint64_t recorded = 0);
  /// C10: answers when a variable named `name` exists in this process.
  void wait_for(caf::timespan timeout, std::string name,
                reply_fn<shared_variable_info> done);
  /// P14: answers when every process has reached its barrier of the same
  /// number.
  void barrier(caf::timespan timeout, reply_fn<ok_atom> done);

  void create(caf::timespan timeout, variable_spec spec,
              reply_fn<shared_variable_info> done);
  void lookup(const std::string& name, reply_fn<shared_variable_info> done);
  /// The description this process keeps for variable `id` (shared with
  /// its replicas and the handles the API gives out), or null.
  shared_variable_info shared_info(uint64_t id) const;
  void list(reply_fn<std::vector<variable_info>> done);
  void destroy(caf::timespan timeout, uint64_t id, reply_fn<ok_atom> done);
  void read(caf::timespan timeout, uint64_t id, reply_fn<tensor> done);
  void update(caf::timespan timeout, uint64_t id, update_op op, tensor value,
              reply_fn<ok_atom> done);
  /// S4: a cross-replica scatter (coordinator_scatter.cpp).
  void scatter(caf::timespan timeout, uint64_t id, scatter_op op,
               indexed_slices slices, reply_fn<ok_atom> done);
  void local_values(caf::timespan timeout, uint64_t id,
                    reply_fn<std::vector<tensor>> done);
  /// The components of the replicas that have not failed (nullopt for the
  /// failed ones).
  void survivor_values(caf::timespan timeout, uint64_t id,
                       reply_fn<std::vector<std::optional<tensor>>> done);
  void run(caf::timespan timeout, replica_step_ptr step,
           reply_fn<ok_atom> done);
  void all_reduce(caf::timespan timeout, reduce_op op,
                  std::vector<std::vector<tensor>> values,
                  reply_fn<std::vector<tensor>> done);
  /// Across processes, every operation that needs the other processes runs
  /// one collective round even when it fails here (or needs nothing but
  /// the others' consent), so that every process fails or proceeds alike:
  /// `local` is this process's error, `what` the operation in words. In one
  /// process: done(local), or ok.
  void agree(caf::timespan timeout, std::string what, caf::error local,
             reply_fn<ok_atom> done);
  /// Every replica's component in replica id order, from every process (a
  /// collective across processes; local_values in one process).
  void all_values(caf::timespan timeout, uint64_t id,
                  reply_fn<std::vector<tensor>> done);
  strategy_description describe() const;
  void describe(reply_fn<strategy_description> done) { done(describe()); }
  /// A snapshot (M1-M4): the parts' counts and every replica's.
  void metrics(caf::timespan timeout, reply_fn<strategy_metrics> done);
  /// The metrics request: never queued behind operations (a snapshot is
  /// most wanted when they pile up).
  caf::result<strategy_metrics> metrics_now();
  /// M9: every process's snapshot, in rank order (coordinator_process_
  /// metrics.cpp).
  void metrics_of_processes(caf::timespan timeout,
                            reply_fn<std::vector<strategy_metrics>> done);
  /// Stops the replicas and the coordinator.
  void shutdown();

private:
  friend class services_ordering;

  /// The description of the variable named `name` if it exists (and its
  /// creation completed) here, else null.
  shared_variable_info existing(const std::string& name) const;

  /// Chooses how operations are ordered across processes (once).
  void choose_ordering();
  /// M8: failed operations and SIGUSR1 ask for dumps (where set up).
  void dump_when_failing();

  caf::expected<caf::timespan> remaining(caf::timespan timeout,
                                         const char* what) const override;
  caf::error check_replicas() const override;
  void flush_writes() override { writes_.flush_queued(); }

  /// The replicas in this process (the slots of collective plans).
  int num_replicas() const { return static_cast<int>(replicas_.size()); }
  /// The replicas of the strategy, in every process.
  int total_replicas() const {
    return processes ? processes->total_replicas : num_replicas();
  }

  /// A new plan for this strategy's collectives (marked across processes
  /// with `what` as its description when the strategy spans processes).
  std::shared_ptr<collective_plan> new_plan(std::string what = {});
  /// An aggregated read of `id` (found) by a collective (`first_only`:
  /// replica 0's component, broadcast); `across`: it is a round of the
  /// processes, which a failure here still takes part in.
  void read_by_collective(caf::timespan timeout, uint64_t id, reduce_op op,
                          bool first_only, bool across,
                          const std::string& what, reply_fn<tensor> done);
  /// An update's checks in this process (V4, the value, the replicas).
  caf::error update_checks(const variable_info& info, update_op op,
                           const tensor& value) const;
  /// V4: an integer update of components that may differ takes the
  /// checked collective (update_checked).
  bool checked_update(const variable_info& info, update_target target,
                      update_op op) const;
  /// P17: an update of `id` (found) that services mode's group commit may
  /// decide with others in one round: its dispatch needs no round of its
  /// own. The same in every process (the registry is).
  bool joins_group_commit(uint64_t id, update_op op);
  /// The update after its checks (and, across processes, agreement).
  void dispatch_update(caf::timespan timeout, uint64_t id, update_op op,
                       tensor value, reply_fn<ok_atom> done);
  /// V4: an integer update of components that may differ, by a
  /// collective that checks every component for overflow before any is
  /// written.
  void update_checked(caf::timespan timeout, const variable_info& info,
                      update_op op, tensor value, reply_fn<ok_atom> done);
  void dispatch_scatter(caf::timespan timeout, uint64_t id, scatter_op op,
                        update_target target, scatter_rows rows,
                        reply_fn<ok_atom> done);
  /// V4 for a cross-replica scatter into components that differ: a
  /// collective checks every component before any is written.
  bool checked_on_every_component(const variable_info& info,
                                  const sync_policy& policy,
                                  update_target target, scatter_op op) const;
  void create_here(caf::timespan timeout, variable_spec spec,
                   variable_info info, reply_fn<shared_variable_info> done);
  /// Destroys `id` here (after the processes agreed).
  void destroy_here(caf::timespan timeout, uint64_t id,
                    reply_fn<ok_atom> done);
  caf::expected<variable_entry*> find(uint64_t id) {
    return variables_.find(id);
  }
  /// M9's second round: the snapshots padded to the longest of `lengths`.
  void gather_snapshots(caf::timespan timeout, const tensor& lengths,
                        std::vector<char> bytes,
                        reply_fn<std::vector<strategy_metrics>> done);
  /// Host bytes of one copy of `nbytes` on every host replica.
  uint64_t host_copies_bytes(uint64_t nbytes) const;

  /// Runs a collective (collective_runner.hpp), or for a small step's plan
  /// (`small`, sync/collectives/small_step.hpp) combines the contributions
  /// here for the replicas to apply in one round; one at a time, in order.
  void run_collective(caf::timespan timeout,
                      std::shared_ptr<collective_plan> plan,
                      reply_fn<ok_atom> done, bool small = false) {
    collectives_.run(timeout, std::move(plan), std::move(done), small);
  }
  /// W4: the error of the first replica that voted an item's contributions
  /// unequal at enter (its vote: the item's index; -1: all equal).
  caf::error unequal_vote(const std::vector<int64_t>& votes,
                          const collective_plan& plan) override;

  // -- steps (step_driver.hpp) -----------------------------------------------

  /// S1: the plan item of a step's scatter updates (update k of every
  /// report), combined row by row; an error before anything is applied.
  caf::error add_step_scatter(collective_plan& plan, size_t k,
                              std::vector<step_report>& reports);
  /// The plan item of a step's dense update k (its contributions moved).
  caf::error add_step_update(collective_plan& plan, size_t k,
                             std::vector<step_report>& reports);
  caf::error check_step_collectives(
    const std::vector<step_report>& reports) const override;
  uint64_t flight_now() const override { return flight_now_; }
  uint64_t exchange_flight(uint64_t entry) override {
    return std::exchange(flight_now_, entry);
  }
  /// Every replica ended step `seq`: one fused collective applies its
  /// updates, in issue order (it waited `waited` for its slowest replica,
  /// M2).
  void finish_step(caf::timespan timeout, std::vector<step_report>& reports,
                   uint64_t seq, caf::timespan waited,
                   reply_fn<ok_atom> done) override;
  /// X1-X5: the result of the collective every replica waits at (checked
  /// to match), the same for every replica.
  void run_step_collective(caf::timespan timeout,
                           std::vector<step_report>& reports,
                           reply_fn<std::vector<tensor>> done) override;
  /// all_gather and broadcast across processes: every replica's values.
  void gather_step_values(caf::timespan timeout, step_collective request,
                          std::vector<std::vector<tensor>> local,
                          reply_fn<std::vector<tensor>> done);

  // -- the parts -------------------------------------------------------------

  self_pointer self_;
  caf::timespan default_timeout_;
  selected_collective collective_;
  memory_budget budget_;
  std::shared_ptr<std::atomic<uint64_t>> local_adds_dropped_;
  /// Deadlines of operations in flight, and the tick that expires them.
  operation_deadlines deadlines_;
  /// The replicas in this process, their failures, and the fan-out.
  replica_set replicas_;
  /// The variables of the strategy, by id and by name.
  variable_registry variables_;
  /// Reads that wait for the writes of their variable in flight (W8).
  read_barrier reads_{variables_, deadlines_};
  /// Which operations run now and which wait (V3).
  admission admission_;
  /// The group commit of cross-replica writes in one process.
  write_batcher writes_{self_, replicas_, reads_, deadlines_};
  /// The last operations dispatched (M7; null where off); their answers
  /// close them.
  std::shared_ptr<flight_recorder> flight_;
  /// The recorded operation being dispatched (0: none), whose plans tell
  /// the recorder their stages.
  uint64_t flight_now_ = 0;
  /// M8: the recorder written to files (where set up).
  flight_dumps dumps_;
  /// Metrics (coordinator_metrics.hpp); refusals are counted by const
  /// checks.
  mutable coordinator_record record_{variables_};
  /// Host collectives, one at a time.
  collective_runner collectives_{self_, replicas_, collective_, *this,
                                 record_};
  /// Callers waiting for a variable to exist or for a barrier.
  coordinator_waits waits_{deadlines_};
  /// Replica steps, round by round.
  step_driver steps_{*this, replicas_, record_,
                     collective_.uses_staging_buffers};
  /// How operations are ordered across processes (chosen once, last: it
  /// may use every other part).
  std::unique_ptr<ordering> ordering_;
};

} // namespace varsync
