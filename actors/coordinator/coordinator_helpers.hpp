#pragma once
// Internal to the coordinator's source files (actors/coordinator/*.cpp):
// small helpers that several of them use.

#include <atomic>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

#include <caf/sec.hpp>

#include "actors/coordinator/coordinator_state.hpp"
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

// done(local) after the processes agreed that the operation failed
// (coordinator_state::agree): a failure here still takes part in the round.
template <class T>
void fail_agreed(coordinator_state& c, caf::timespan timeout, std::string what,
                 caf::error local, reply_fn<T> done) {
  c.agree(timeout, std::move(what), std::move(local),
          [done = std::move(done)](caf::expected<ok_atom> r) {
            done(r ? make_error(errc::invalid_argument, "unreachable")
                   : std::move(r.error()));
          });
}

// The answer `fn` that first closes entry `id` of the flight recorder (M7).
template <class T>
reply_fn<T> closing_flight(std::shared_ptr<flight_recorder> flight,
                           uint64_t id, reply_fn<T> fn) {
  return [flight = std::move(flight), id,
          fn = std::move(fn)](caf::expected<T> r) {
    flight->finish(id, r ? caf::error{} : r.error());
    if (fn)
      fn(std::move(r));
  };
}

// Sets `slot` to `value` for a scope, then back to what it held.
struct restore_on_exit {
  uint64_t& slot;
  uint64_t outer;
  restore_on_exit(uint64_t& s, uint64_t value)
    : slot(s), outer(std::exchange(s, value)) {
  }
  ~restore_on_exit() { slot = outer; }
  restore_on_exit(const restore_on_exit&) = delete;
  restore_on_exit& operator=(const restore_on_exit&) = delete;
};

// Variable ids are unique in the process, so that a handle of one strategy
// never addresses another strategy's variable.
inline uint64_t next_variable_id() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

} // namespace coordinator_helpers

} // namespace varsync
