#pragma once
// The coordinator's replicas in this process: their handles and devices, the
// failure each has had (kept from its down message), and the fan-out of one
// request to all of them, gathered in replica order.

#include <cstddef>
#include <memory>
#include <optional>
#include <type_traits>
#include <utility>
#include <string>
#include <vector>

#include <caf/error.hpp>
#include <caf/timespan.hpp>

#include "actors/coordinator/coordinator_metrics.hpp"
#include "actors/coordinator/operation_deadlines.hpp"
#include "actors/spread_sends.hpp"
#include "messages/completion.hpp"
#include "messages/coordinator_interface.hpp"
#include "messages/replica_interface.hpp"
#include "varsync/device_id.hpp"
#include "varsync/error.hpp"

namespace varsync {

/// The answer of a gather of `ok`s as one `ok`.
inline reply_fn<std::vector<ok_atom>> all_ok(reply_fn<ok_atom> done) {
  return [done = std::move(done)](caf::expected<std::vector<ok_atom>> r) {
    if (r)
      done(ok_atom::value);
    else
      done(std::move(r.error()));
  };
}

class replica_set {
public:
  using self_pointer = coordinator_internal_actor::pointer;

  /// What a gather needs from the coordinator.
  class link {
  public:
    virtual ~link() = default;
    /// W8: the writes queued by the group commit leave before a request.
    virtual void flush_writes() = 0;
  };

  /// `deadlines` watches the gathers.
  replica_set(self_pointer self, std::vector<device_id> devices,
              std::vector<replica_actor> replicas, link& owner,
              operation_deadlines& deadlines);

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
  /// The replica answered that it failed, or exited before answering.
  static bool gone(const caf::error& err);

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
  /// (step rounds, M4). `lost`: for reads of the survivors, a replica that
  /// fails as it is asked (it answers that it failed, or its actor is gone
  /// before it answers) marks its place here instead of failing the gather.
  template <class T, class Send>
  void gather(size_t count, caf::timespan timeout, Send send,
              reply_fn<std::vector<T>> done,
              on_deadline late = on_deadline::abandoned,
              fan_out how = fan_out::local,
              std::shared_ptr<reply_times> times = nullptr,
              std::shared_ptr<std::vector<bool>> lost = nullptr);
  template <class Send>
  void gather_ok(size_t count, caf::timespan timeout, Send send,
                 reply_fn<ok_atom> done,
                 on_deadline late = on_deadline::abandoned,
                 fan_out how = fan_out::local);

  /// How a request to every replica is gathered.
  struct ask_options {
    on_deadline late = on_deadline::abandoned;
    fan_out how = fan_out::local;
    std::shared_ptr<reply_times> times = nullptr;
  };
  /// Sends the message `xs...` to every replica and gathers their answers
  /// of type T.
  template <class T, class... Ts>
  void ask_all(caf::timespan timeout, ask_options opts,
               reply_fn<std::vector<T>> done, Ts... xs) {
    gather<T>(
      size(), timeout,
      [this, ... xs = std::move(xs)](size_t i) {
        return self_->request(replicas_[i], caf::infinite, xs...);
      },
      std::move(done), opts.late, opts.how, std::move(opts.times));
  }
  /// Sends the message `xs...` to every replica, expecting no answer.
  template <class... Ts>
  void tell_all(const Ts&... xs) {
    for (auto& replica : replicas_)
      self_->send(replica, xs...);
  }

private:
  template <class T>
  struct gather_state;

  self_pointer self_;
  std::vector<device_id> devices_;
  std::vector<replica_actor> replicas_;
  std::vector<caf::error> failures_;
  link& owner_;
  operation_deadlines& deadlines_;
};

template <class T>
struct replica_set::gather_state final : expirable {
  operation_deadlines* deadlines = nullptr;
  on_deadline late = on_deadline::abandoned;
  std::vector<T> values;
  size_t pending = 0;
  bool finished = false;
  caf::error error;
  reply_fn<std::vector<T>> done;
  operation_deadlines::handle deadline;

  void finish() {
    finished = true;
    if (error)
      done(std::move(error));
    else
      done(std::move(values));
  }

  bool watched = false;

  void finish_one() {
    if (--pending > 0 || finished)
      return;
    if (watched)
      deadlines->unwatch(deadline);
    finish();
  }

  void expire() override {
    if (finished)
      return;
    auto missing = std::to_string(pending) + " of "
                   + std::to_string(values.size());
    if (late == on_deadline::committed)
      error = make_error(errc::committed_late,
                         "the operation was committed and is applied to "
                         "every live component, but "
                           + missing
                           + " replicas did not confirm it within the "
                             "deadline");
    else
      error = make_error(errc::timeout,
                         missing
                           + " replicas did not answer within the "
                             "deadline; the operation was abandoned before "
                             "its commit point");
    finish();
  }
};

template <class T, class Send>
void replica_set::gather(size_t count, caf::timespan timeout, Send send,
                         reply_fn<std::vector<T>> done, on_deadline late,
                         fan_out how, std::shared_ptr<reply_times> times,
                         std::shared_ptr<std::vector<bool>> lost) {
  // Queued writes reach the replicas before this request (W8).
  owner_.flush_writes();
  if (count == 0) {
    done(std::vector<T>{});
    return;
  }
  auto st = std::make_shared<gather_state<T>>();
  st->deadlines = &deadlines_;
  st->late = late;
  st->values.resize(count);
  st->pending = count;
  st->done = std::move(done);
  if (timeout != caf::timespan::max()) { // max: no deadline
    st->deadline = deadlines_.watch(timeout, st.get());
    st->watched = true;
  }
  std::optional<spread_sends<std::remove_pointer_t<self_pointer>>> spread;
  if (count > 1 && how == fan_out::spread)
    spread.emplace(self_);
  for (size_t i = 0; i < count; ++i) {
    send(i).then(
      [st, i, times](T value) {
        if (times)
          times->at[i] = reply_times::clock::now();
        st->values[i] = std::move(value);
        st->finish_one();
      },
      [this, st, i, lost](caf::error& err) {
        if (lost && gone(err))
          lost->at(i) = true;
        else if (!st->error)
          st->error = translate(err, i);
        st->finish_one();
      });
  }
}

template <class Send>
void replica_set::gather_ok(size_t count, caf::timespan timeout, Send send,
                            reply_fn<ok_atom> done, on_deadline late,
                            fan_out how) {
  gather<ok_atom>(count, timeout, std::move(send), all_ok(std::move(done)),
                  late, how);
}

} // namespace varsync
