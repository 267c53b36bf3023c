#pragma once
// Internal to the coordinator's source files (actors/coordinator_*.cpp): small
// helpers and the templates (gather) that several of them use.

#include <atomic>
#include <optional>
#include <string>
#include <type_traits>

#include <caf/sec.hpp>

#include "actors/coordinator/coordinator_state.hpp"
#include "actors/spread_sends.hpp"
#include "varsync/internal/by_value.hpp"
#include "varsync/error.hpp"

namespace varsync {

namespace coordinator_helpers {

inline std::string quote_name(const std::string& s) {
  return "'" + s + "'";
}

// Cross-replica reductions of values up to this size gather copies and
// reduce on the coordinator: constant work, cheaper than a collective (the
// by-value rule, varsync/internal/by_value.hpp).
constexpr size_t gather_threshold_bytes = by_value_bytes;

inline bool small_enough_to_gather(const variable_info& info) {
  return static_cast<size_t>(element_count(info.shape)) * size_of(info.type)
         <= gather_threshold_bytes;
}

// Variable ids are unique in the process, so that a handle of one strategy
// never addresses another strategy's variable.
inline uint64_t next_variable_id() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

} // namespace coordinator_helpers

template <class T>
struct replica_set::gather_state final : expirable {
  replica_set::link* owner = nullptr;
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
      owner->unwatch(deadline);
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
                               reply_fn<std::vector<T>> done,
                               on_deadline late, fan_out how,
                               std::shared_ptr<reply_times> times) {
  // Queued writes reach the replicas before this request (W8).
  owner_.flush_writes();
  if (count == 0) {
    done(std::vector<T>{});
    return;
  }
  auto st = std::make_shared<gather_state<T>>();
  st->owner = &owner_;
  st->late = late;
  st->values.resize(count);
  st->pending = count;
  st->done = std::move(done);
  if (timeout != caf::timespan::max()) { // max: no deadline
    st->deadline = owner_.watch(timeout, st.get());
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
      [this, st, i](caf::error& err) {
        if (!st->error)
          st->error = translate(err, i);
        st->finish_one();
      });
  }
}

template <class Send>
void replica_set::gather_ok(size_t count, caf::timespan timeout,
                                  Send send, reply_fn<ok_atom> done,
                                  on_deadline late, fan_out how) {
  gather<ok_atom>(count, timeout, std::move(send),
                  [done = std::move(done)](caf::expected<std::vector<ok_atom>> r) {
                    if (r)
                      done(ok_atom::value);
                    else
                      done(std::move(r.error()));
                  },
                  late, how);
}

} // namespace varsync
