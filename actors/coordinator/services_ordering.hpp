#pragma once
// The ordering of services mode (cluster_mode::services): an operation
// issued here travels to process 0's sequencer as data and comes back
// numbered; every process applies the numbered operations one after the
// other, so that all of them see one order (W8 across processes, P2). The
// operation then runs exactly as in training mode, agreement round
// included, because every process now issues it at the same point; the
// updates that wait their turn together share one round (group commit,
// P17: actors/coordinator/group_commit.hpp).

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <unordered_map>

#include "actors/coordinator/group_commit.hpp"
#include "actors/coordinator/operation_deadlines.hpp"
#include "actors/coordinator/ordering.hpp"

namespace varsync {

class services_ordering final : public ordering {
public:
  /// `submit` hands an operation to process 0's sequencer.
  services_ordering(coordinator_state& coordinator,
                    std::function<void(sequenced_operation)> submit);
  ~services_ordering() override;

  size_t in_flight_limit() const override;
  bool every_process_takes_part() const override { return false; }
  bool take(caf::timespan timeout, operation& op, completion& done) override;
  void barrier(caf::timespan timeout, reply_fn<ok_atom> done) override;
  void ordered(sequenced_operation op) override;
  void lost(caf::error reason) override;
  void report(strategy_metrics& m) const override;

private:
  /// A caller waiting for its operation to come back from the sequencer.
  struct ticket : expirable {
    operation_deadlines::clock::time_point since;
    caf::timespan timeout;
    operation_deadlines::handle deadline;
    bool watched = false;
    /// The caller has its answer (the deadline passed first).
    bool answered = false;
    completion done;
    /// The operation's bulk data, kept here while the operation travels
    /// without it (defer_payload); this process broadcasts it at the
    /// operation's turn.
    held_payload payload;
    void answer(caf::error err);
    void expire() override;
  };

  /// The answer to the caller where it waits here (`owner`), then the end
  /// of the operation's turn.
  template <class T>
  static reply_fn<T> turn_reply(std::shared_ptr<ticket> owner,
                                std::function<void()> finished);

  /// Whether `op`, issued here, goes to the sequencer: after process 0
  /// was lost, lookup, list, local_values and reads of mirrored variables
  /// answer from this process (P3).
  bool orders_through_sequencer(const operation& op);
  /// Hands `op` to the sequencer; `done` runs when it was applied here in
  /// its turn (or failed).
  void sequence(caf::timespan timeout, operation op, completion done);
  /// Variable ids are each process's own (another strategy of a process
  /// may have numbered some first): an operation names its variable across
  /// processes by the number of the operation that created it, the same in
  /// every process. to_keys rewrites `op`'s variable so before it leaves
  /// (the error of a variable unknown here, which then fails at once);
  /// to_local back to this process's id when it is applied (0: none).
  caf::error to_keys(operation& op);
  void to_local(sequenced_operation& op);
  /// A create applied here in its turn: `key` names the variable `id`.
  void created(uint64_t key, uint64_t id);
  /// A destroy of `id` applied here: its key names nothing more.
  void destroyed(uint64_t id);
  /// Applies the ordered operations one after the other.
  void run_sequenced();
  void replay(sequenced_operation op);
  /// The time left to an operation's caller (`t`: its ticket where it
  /// waits here; else the strategy's timeout), counted from its request:
  /// `timeout` gets it, or the whole timeout with the error once it passed.
  caf::error time_left(const ticket* t, const char* what,
                       caf::timespan& timeout);
  /// The caller's ticket of `op` where it was issued here (taken out of
  /// the waiting ones), else null.
  std::unique_ptr<ticket> take_ticket(const sequenced_operation& op);
  /// P17: whether `op` may share a group commit's round (the same answer
  /// in every process).
  bool joins_group(const sequenced_operation& op);
  /// P17: one agreement round for the run of updates at the front of the
  /// ordered ones; apply_group applies those the processes decided.
  void commit_group();
  void apply_group(caf::expected<group_commit::decision> decided,
                   std::vector<caf::error> local,
                   std::vector<caf::timespan> timeouts, uint64_t front_entry,
                   std::shared_ptr<bool> running);
  /// The ordered operation `op` runs here (its data back in it); `owner`
  /// is its ticket where it was issued here, `finished` ends its turn.
  /// `recorded`: its flight recorder entry, opened by receive_payload.
  void apply_ordered(sequenced_operation op, std::shared_ptr<ticket> owner,
                     std::function<void()> finished, uint64_t recorded = 0);
  /// Every process receives the deferred data of `op` from the process
  /// that issued it (one collective round through the process group),
  /// then applies it; a failure fails the operation on every process.
  /// The round is the first stage of the operation's entry in the flight
  /// recorder (M7).
  void receive_payload(sequenced_operation op, std::shared_ptr<ticket> owner,
                       std::function<void()> finished);
  /// P14: process `origin`'s barrier came in its turn.
  void arrive_at_barrier(int origin, std::shared_ptr<ticket> owner,
                         std::function<void()> finished);

  coordinator_state& c_;
  std::function<void(sequenced_operation)> submit_;
  std::unordered_map<uint64_t, std::unique_ptr<ticket>> tickets_;
  uint64_t tickets_issued_ = 0;
  std::deque<sequenced_operation> ordered_;
  /// An ordered operation is being applied.
  bool applying_ordered_ = false;
  /// Set while an ordered operation starts (synchronously): it runs here
  /// instead of going to the sequencer again.
  bool replaying_ = false;
  caf::error sequencer_failure_;
  uint64_t last_sequence_ = 0;
  /// Metrics: the bytes that travelled with the operations, and through
  /// the data plane.
  uint64_t inline_bytes_ = 0;
  uint64_t data_plane_bytes_ = 0;
  /// The variables created in their turn: each one's key (the number of
  /// the operation that created it) and its id here.
  std::unordered_map<uint64_t, uint64_t> key_of_id_;
  std::unordered_map<uint64_t, uint64_t> id_of_key_;
  /// Metrics: the group commit's rounds and the updates they decided.
  uint64_t group_rounds_ = 0;
  uint64_t grouped_updates_ = 0;
};

} // namespace varsync
