#pragma once
// Test support for users' own tests: inject faults into replicas through
// strategy_options::faults.
//
//   strategy_options o;
//   o.faults = {varsync::fail_replica_at(1, 5),               // replica 1 dies at its 5th operation
//               varsync::delay_replica(2, std::chrono::milliseconds(50))};
//
// An operation is a request a replica serves: a component create, read,
// update or destroy, a replica step, a local read or update, or entering a
// collective. A failed replica exits with a device_error; the coordinator
// notices through CAF monitoring, and every operation that needs it fails
// with replica_failed. Delays defer operations without blocking a scheduler
// thread.

#include "varsync/ext/replica_fault.hpp"
#include "varsync/strategy.hpp"
