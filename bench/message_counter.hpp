#pragma once
// Counts the messages that scheduled (event-based) actors receive.
//
// CAF 0.17 has no public per-actor message counter (its actor profiler is
// compiled out of Debian's libcaf), so message_counter.cpp interposes
// caf::scheduled_actor::enqueue, the virtual function through which every
// message reaches a scheduled actor's mailbox: the benchmark's definition
// counts and forwards to libcaf_core's (found with dlsym(RTLD_NEXT)). It
// binds for every actor whose vtable is linked into the benchmark, which
// includes varsync's coordinator and replica actors (varsync is a static
// library); active() tells whether the interposition took effect.
// Link message_counter.cpp only into the benchmark that needs it.

#include <cstdint>

namespace bench::msgcount {

/// Starts counting the messages received by `actor` (a caf::abstract_actor*)
/// in `slot` (0..15), from zero.
void watch(int slot, const void* actor);

/// Messages received by the actor in `slot` since watch().
uint64_t received(int slot);

/// Messages received by any scheduled actor since the program started.
uint64_t total();

/// True once the interposed enqueue has run (the counts are meaningful).
bool active();

} // namespace bench::msgcount
