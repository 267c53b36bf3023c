#pragma once
// The coordinator's replicas in this process: their handles and devices, the
// failure each has had (kept from its down message), and the fan-out of one
// request to all of them, gathered in replica order (coordinator_gather.hpp
// holds the gather's templates).

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include <caf/error.hpp>
#include <caf/timespan.hpp>

#include "actors/coordinator/operation_deadlines.hpp"
#include "messages/completion.hpp"
#include "messages/coordinator_interface.hpp"
#include "messages/replica_interface.hpp"
#include "varsync/device_id.hpp"

namespace varsync {

struct reply_times;

class replica_set {
public:
  using self_pointer = coordinator_internal_actor::pointer;

  /// What a gather needs from the coordinator.
  class link {
  public:
    virtual ~link() = default;
    /// W8: the writes queued by the group commit leave before a request.
    virtual void flush_writes() = 0;
    virtual operation_deadlines::handle watch(caf::timespan timeout,
                                              expirable* op)
      = 0;
    virtual void unwatch(operation_deadlines::handle h) = 0;
  };

  replica_set(self_pointer self, std::vector<device_id> devices,
              std::vector<replica_actor> replicas, link& owner);

  size_t size() const { return replicas_.size(); }
  const replica_actor& operator[](size_t i) const { return replicas_[i]; }
  auto begin() const { return replicas_.begin(); }
  auto end() const { return replicas_.end(); }
  const std::vector<replica_actor>& handles() const { return replicas_; }
  const std::vector<device_id>& devices() const { return devices_; }

  /// Monitors the replicas (a failure is kept per replica) and binds them
  /// to this coordinator.
  void bind();
  bool failed(size_t i) const { return static_cast<bool>(failures_[i]); }
  /// `replica_failed` naming the first failed replica (its id in the
  /// strategy: `first` + its index here), or none.
  caf::error check(size_t first) const;
  /// "replica i (device): reason" for each failed replica.
  std::vector<std::string> describe_failures() const;
  /// A replica's error reply (or a lost reply) as varsync's error.
  caf::error translate(const caf::error& err, size_t replica) const;

  /// What a passed deadline means for a gather: `abandoned`, nothing was
  /// changed (reads) or what was changed is undone (create); `committed`,
  /// the requests change state and were all sent, so they will be applied
  /// to every live component: a late confirmation is `committed_late` (V2).
  enum class on_deadline { abandoned, committed };
  /// How a gather's requests reach the replicas: `local` queues the woken
  /// replicas behind the coordinator on its scheduler thread (cheapest for
  /// small work: no thread hand-off); `spread` hands them to round-robin
  /// threads, woken if asleep (actors/spread_sends.hpp), so that work that
  /// takes a while (a step, a collective's slices) runs in parallel.
  enum class fan_out { local, spread };

  /// Sends a request to replicas 0..count-1 (`send(i)` makes it) and
  /// gathers the replies in replica order; the first error wins, and the
  /// operation fails with `timeout` (or `committed_late`) if it has not
  /// completed within `timeout`. `times`: records when each reply arrived
  /// (step rounds, M4).
  template <class T, class Send>
  void gather(size_t count, caf::timespan timeout, Send send,
              reply_fn<std::vector<T>> done,
              on_deadline late = on_deadline::abandoned,
              fan_out how = fan_out::local,
              std::shared_ptr<reply_times> times = nullptr);
  template <class Send>
  void gather_ok(size_t count, caf::timespan timeout, Send send,
                 reply_fn<ok_atom> done,
                 on_deadline late = on_deadline::abandoned,
                 fan_out how = fan_out::local);

private:
  template <class T>
  struct gather_state;

  self_pointer self_;
  std::vector<device_id> devices_;
  std::vector<replica_actor> replicas_;
  std::vector<caf::error> failures_;
  link& owner_;
};

} // namespace varsync
