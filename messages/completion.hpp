#pragma once
// How an operation's outcome reaches whoever asked: a typed callback
// (reply_fn), held as a `completion` where the operation is a value whose
// type is known only at run time (a client call, a sequenced operation).

#include <functional>
#include <optional>
#include <utility>
#include <variant>
#include <vector>

#include <caf/error.hpp>
#include <caf/expected.hpp>

#include "messages/atoms.hpp"
#include "messages/shared_variable_info.hpp"
#include "varsync/ext/metrics.hpp"
#include "varsync/strategy_description.hpp"
#include "varsync/tensor.hpp"
#include "varsync/variable.hpp"

namespace varsync {

template <class T>
using reply_fn = std::function<void(caf::expected<T>)>;

/// One alternative per result type of messages/operation.hpp.
using completion
  = std::variant<reply_fn<ok_atom>, reply_fn<tensor>,
                 reply_fn<shared_variable_info>,
                 reply_fn<std::vector<variable_info>>,
                 reply_fn<std::vector<tensor>>,
                 reply_fn<std::vector<std::optional<tensor>>>,
                 reply_fn<strategy_description>, reply_fn<strategy_metrics>,
                 reply_fn<std::vector<strategy_metrics>>>;

template <class T>
completion make_completion(reply_fn<T> fn) {
  return completion{std::in_place_type<reply_fn<T>>, std::move(fn)};
}

/// Whether `done` holds a callback (not taken, not empty).
inline bool pending(const completion& done) {
  return std::visit([](auto& fn) { return static_cast<bool>(fn); }, done);
}

/// Answers `done` with `err`, whatever its result type.
inline void fail(completion& done, caf::error err) {
  std::visit(
    [&err](auto& fn) {
      if (fn)
        fn(std::move(err));
    },
    done);
}

/// A completion of the same type, each callback wrapped by `wrap` (a
/// generic callable taking and returning a reply_fn<T>).
template <class Wrap>
completion wrap_completion(completion done, Wrap&& wrap) {
  return std::visit(
    [&wrap](auto& fn) -> completion {
      return make_completion(wrap(std::move(fn)));
    },
    done);
}

} // namespace varsync
