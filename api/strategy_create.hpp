#pragma once
// Internal: the one creation path of a strategy. strategy::create passes no
// faults; varsync::testing::create_with_faults passes the injected ones, so
// test support stays out of strategy_options.

#include <vector>

#include <caf/expected.hpp>

#include "varsync/ext/replica_fault.hpp"
#include "varsync/strategy.hpp"

namespace varsync::detail {

/// A strategy inside `*sys`, or with its own actor system when `sys` is null.
caf::expected<strategy> create_strategy(caf::actor_system* sys,
                                        strategy_options options,
                                        std::vector<replica_fault> faults);

} // namespace varsync::detail
