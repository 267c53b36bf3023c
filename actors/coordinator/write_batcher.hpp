#pragma once
// The coordinator's group commit of cross-replica writes in one process.
// A write whose checks passed is committed (V2) and queued. The queue goes
// to the replicas at once when no earlier writes wait for their
// confirmation and no other message waits in the mailbox; otherwise the
// writes that arrive meanwhile queue behind them and leave together, one
// message per replica, as soon as the earlier ones are confirmed (or after
// the waiting messages). A lone caller pays nothing extra; concurrent
// callers share the replicas' messages and replies. Any other message to
// the replicas sends the queue first (flush_queued()), so that they see
// every message in the order the coordinator decided it (W8).

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include <caf/error.hpp>
#include <caf/timespan.hpp>

#include "actors/coordinator/operation_deadlines.hpp"
#include "actors/coordinator/read_barrier.hpp"
#include "actors/coordinator/replica_set.hpp"
#include "messages/completion.hpp"
#include "messages/component_writes.hpp"
#include "messages/coordinator_interface.hpp"
#include "messages/replica_interface.hpp"

namespace varsync {

class write_batcher {
public:
  using self_pointer = coordinator_internal_actor::pointer;

  /// A write answered releases the reads waiting for it in `reads` (W8).
  write_batcher(self_pointer self, const replica_set& replicas,
                read_barrier& reads, operation_deadlines& deadlines);
  ~write_batcher();

  write_batcher(const write_batcher&) = delete;
  write_batcher& operator=(const write_batcher&) = delete;

  /// Queues write `w`, committed (its checks passed): it leaves at once if
  /// no earlier writes wait for their confirmation and no other message
  /// waits in the mailbox, else with the writes that queue behind them
  /// when those are confirmed (or those messages handled). `done` gets its
  /// outcome, or committed_late once `timeout` passed.
  void queue(component_write w, caf::timespan timeout, reply_fn<ok_atom> done);
  /// Sends the queued writes, if any: every other message to the replicas
  /// goes after them (W8).
  void flush_queued() {
    if (filling_)
      flush();
  }
  /// The message to self that a write behind the mailbox's messages sent:
  /// the writes queued meanwhile leave.
  void on_flush_message();

  /// Metrics: writes sent, and the messages (groups) that carried them.
  uint64_t writes_sent() const { return writes_sent_; }
  uint64_t groups_sent() const { return groups_sent_; }

private:
  /// Writes sent (or to be sent) to the replicas as one message each.
  struct run;

  void flush();
  /// Sends a run of one write as the write's own message.
  void send_alone(run* r, size_t count);
  void watch(run& r);
  void answer(run& r, size_t k, caf::error err);
  void confirm(run& r);
  void expire(run& r);
  /// A sent run has every write answered: the queue may leave.
  void confirmed();

  self_pointer self_;
  const replica_set& replicas_;
  read_barrier& reads_;
  operation_deadlines& deadlines_;
  /// A write that finds nothing in flight but messages waiting in the
  /// mailbox leaves after them (a message to self), with their writes.
  bool flush_scheduled_ = false;
  /// Every run, owned here: the reply handlers hold plain pointers (no
  /// reference count touched per replica on the write path).
  std::vector<std::unique_ptr<run>> runs_;
  /// Runs whose replies are all in, reused by the next writes (queue()).
  std::vector<run*> idle_;
  run* filling_ = nullptr;
  /// Sent runs with writes not yet answered.
  size_t runs_unconfirmed_ = 0;
  uint64_t writes_sent_ = 0;
  uint64_t groups_sent_ = 0;
};

} // namespace varsync
