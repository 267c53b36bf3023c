// See message_counter.hpp. This file deliberately defines a member function
// of CAF's scheduled_actor: the static linker prefers it over the one in
// libcaf_core.so for the vtables linked into this executable.

#include "bench/message_counter.hpp"

#include <atomic>
#include <cstdio>
#include <cstdlib>

#include <dlfcn.h>

#include <caf/abstract_actor.hpp>
#include <caf/execution_unit.hpp>
#include <caf/mailbox_element.hpp>
#include <caf/scheduled_actor.hpp>

namespace bench::msgcount {

namespace {

constexpr int slots = 16;
std::atomic<const void*> watched[slots];
std::atomic<uint64_t> counts[slots];
std::atomic<uint64_t> all{0};
std::atomic<bool> ran{false};

using enqueue_fn = void (*)(caf::scheduled_actor*, caf::mailbox_element_ptr,
                            caf::execution_unit*);

enqueue_fn original() {
  static enqueue_fn fn = [] {
    void* sym = dlsym(RTLD_NEXT,
                      "_ZN3caf15scheduled_actor7enqueueESt10unique_ptrINS_"
                      "15mailbox_elementENS_6detail8disposerEEPNS_14execution_"
                      "unitE");
    if (sym == nullptr) {
      std::fprintf(stderr, "message_counter: caf::scheduled_actor::enqueue "
                           "not found in libcaf_core\n");
      std::abort();
    }
    return reinterpret_cast<enqueue_fn>(sym);
  }();
  return fn;
}

void count(const void* who) {
  ran.store(true, std::memory_order_relaxed);
  all.fetch_add(1, std::memory_order_relaxed);
  for (int i = 0; i < slots; ++i)
    if (watched[i].load(std::memory_order_relaxed) == who)
      counts[i].fetch_add(1, std::memory_order_relaxed);
}

} // namespace

void watch(int slot, const void* actor) {
  counts[slot].store(0);
  watched[slot].store(actor);
}

uint64_t received(int slot) {
  return counts[slot].load();
}

uint64_t total() {
  return all.load();
}

bool active() {
  return ran.load();
}

} // namespace bench::msgcount

void caf::scheduled_actor::enqueue(caf::mailbox_element_ptr ptr,
                                   caf::execution_unit* eu) {
  bench::msgcount::count(static_cast<const caf::abstract_actor*>(this));
  bench::msgcount::original()(this, std::move(ptr), eu);
}
