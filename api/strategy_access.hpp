#pragma once
// Internal: how varsync's own add-ons (checkpoints, the actor API, metrics)
// and its tests reach the state behind a strategy handle. Users never see it:
// the handle has no public member that exposes its core.

#include <chrono>
#include <memory>
#include <utility>

#include "api/strategy_core.hpp"
#include "varsync/strategy.hpp"

namespace varsync::detail {

struct strategy_access {
  /// The shared state behind `s`.
  static const std::shared_ptr<strategy_core>& core(const strategy& s) {
    return s.core_;
  }
  /// A handle to the strategy behind `core` whose calls use `timeout`.
  static strategy handle(std::shared_ptr<strategy_core> core,
                         std::chrono::milliseconds timeout) {
    return strategy{std::move(core), timeout};
  }
};

} // namespace varsync::detail
