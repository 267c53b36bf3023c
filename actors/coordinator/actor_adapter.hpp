#pragma once
// The actor API's adapter (coordinator_actor.cpp, make_behavior): a typed
// request becomes an operation, admitted like any other (V3), and its
// outcome answers the request. The async and blocking APIs' adapter is the
// client call (messages/client_call.hpp); both end in one dispatch,
// coordinator_state::execute.

#include <type_traits>
#include <utility>

#include <caf/result.hpp>
#include <caf/typed_response_promise.hpp>

#include "actors/coordinator/coordinator_state.hpp"
#include "messages/operation.hpp"

namespace varsync {

/// What the actor API answers for an operation's result: a copy where the
/// coordinator shares its description with the handles of this process.
template <class T>
struct actor_result {
  using type = T;
  static T unwrap(T x) { return x; }
};
template <>
struct actor_result<shared_variable_info> {
  using type = variable_info;
  static variable_info unwrap(const shared_variable_info& x) { return *x; }
};
template <class T>
using actor_result_t = typename actor_result<T>::type;

/// A reply_fn that answers `rp` with an operation's outcome, counted (M1),
/// after releasing its admission slot where it holds one. One function
/// object: it is made for every request.
template <class T>
reply_fn<T> delivering(coordinator_state& c,
                       caf::typed_response_promise<actor_result_t<T>> rp,
                       bool admitted) {
  return [&c, rp, admitted](caf::expected<T> r) mutable {
    if (admitted)
      c.release_slot();
    c.count_outcome(r);
    if (r)
      rp.deliver(actor_result<T>::unwrap(std::move(*r)));
    else
      rp.deliver(std::move(r.error()));
  };
}

/// Admits `op` (or refuses it, V3) and answers the request with its
/// outcome.
template <class Op>
caf::result<actor_result_t<result_of<Op>>> accept(coordinator_state& c,
                                                  Op op) {
  using T = result_of<Op>;
  auto promise = [&c] {
    return c.self()->template make_response_promise<actor_result_t<T>>();
  };
  if constexpr (std::is_same_v<Op, ops::wait_for>) {
    // Waits outside admission: its slot would hold up the operations it
    // waits for (across processes in training mode, one at a time).
    auto rp = promise();
    c.execute(c.default_timeout(), std::move(op),
              make_completion(delivering<T>(c, std::move(rp), false)));
    return rp;
  }
  operation value{std::move(op)};
  const auto bytes = tensor_bytes(value);
  if (auto err = c.refuse_if_full(bytes))
    return err;
  auto rp = promise();
  const auto recorded = c.note_if_queued(value);
  c.admit(
    [&c, value = std::move(value), rp, recorded]() mutable {
      c.execute(c.default_timeout(), std::move(value),
                make_completion(delivering<T>(c, std::move(rp), true)),
                std::nullopt, recorded);
    },
    bytes);
  return rp;
}

} // namespace varsync
