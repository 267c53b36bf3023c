#include "varsync/ext/testing.hpp"

#include <utility>

#include "api/strategy_create.hpp"

namespace varsync::testing {

caf::expected<strategy> create_with_faults(strategy_options options,
                                           std::vector<replica_fault> faults) {
  return detail::create_strategy(nullptr, std::move(options),
                                 std::move(faults));
}

caf::expected<strategy> create_with_faults(caf::actor_system& sys,
                                           strategy_options options,
                                           std::vector<replica_fault> faults) {
  return detail::create_strategy(&sys, std::move(options), std::move(faults));
}

} // namespace varsync::testing
