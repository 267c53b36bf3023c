#pragma once
// Test support for users' own tests: a strategy whose replicas fail or answer
// late where the test says. Kept out of strategy_options so that the core
// API carries no test hooks.
//
//   auto s = varsync::testing::create_with_faults(
//     options, {varsync::fail_replica_at(1, 5),  // replica 1 dies at its 5th operation
//               varsync::delay_replica(2, std::chrono::milliseconds(50))});
//
// An operation is a request a replica serves: a component create, read,
// update or destroy, a replica step, a local read or update, or entering a
// collective. A failed replica exits with a device_error; the coordinator
// notices through CAF monitoring, and every operation that needs it fails
// with replica_failed. Delays defer operations without blocking a scheduler
// thread. A fault names a replica by its id over all processes; one naming
// no replica of this process does nothing here.

#include <vector>

#include <caf/expected.hpp>

#include "varsync/ext/replica_fault.hpp"
#include "varsync/strategy.hpp"

namespace varsync::testing {

/// strategy::create(options), with `faults` injected into its replicas.
caf::expected<strategy> create_with_faults(strategy_options options,
                                           std::vector<replica_fault> faults);

/// strategy::create(sys, options), with `faults` injected into its replicas.
caf::expected<strategy> create_with_faults(caf::actor_system& sys,
                                           strategy_options options,
                                           std::vector<replica_fault> faults);

} // namespace varsync::testing
