#include "core/wake_flag.hpp"

#include <cerrno>
#include <climits>
#include <ctime>

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace varsync::detail {

namespace {

uint32_t* address_of(std::atomic<uint32_t>& word) {
  static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t));
  return reinterpret_cast<uint32_t*>(&word);
}

// Sleeps while `word` holds `seen`, until `deadline` on CLOCK_MONOTONIC (the
// clock of std::chrono::steady_clock here) when given.
void futex_wait(std::atomic<uint32_t>& word, uint32_t seen,
                const timespec* deadline) {
  syscall(SYS_futex, address_of(word), FUTEX_WAIT_BITSET | FUTEX_PRIVATE_FLAG,
          seen, deadline, nullptr, FUTEX_BITSET_MATCH_ANY);
}

void futex_wake(std::atomic<uint32_t>& word) {
  syscall(SYS_futex, address_of(word), FUTEX_WAKE | FUTEX_PRIVATE_FLAG, INT_MAX,
          nullptr, nullptr, 0);
}

} // namespace

void wake_flag::set() noexcept {
  if (word_.exchange(set_state, std::memory_order_acq_rel) == sleeping_state)
    futex_wake(word_);
}

void wake_flag::wait() noexcept {
  auto w = word_.load(std::memory_order_acquire);
  while (w != set_state) {
    if (w == clear_state
        && !word_.compare_exchange_weak(w, sleeping_state,
                                        std::memory_order_acq_rel))
      continue; // w now holds what the word holds
    futex_wait(word_, sleeping_state, nullptr);
    w = word_.load(std::memory_order_acquire);
  }
}

bool wake_flag::wait_until(
  std::chrono::steady_clock::time_point deadline) noexcept {
  auto since_epoch = deadline.time_since_epoch();
  auto secs = std::chrono::duration_cast<std::chrono::seconds>(since_epoch);
  timespec ts{static_cast<time_t>(secs.count()),
              static_cast<long>(
                std::chrono::duration_cast<std::chrono::nanoseconds>(
                  since_epoch - secs)
                  .count())};
  auto w = word_.load(std::memory_order_acquire);
  while (w != set_state) {
    if (std::chrono::steady_clock::now() >= deadline)
      return false;
    if (w == clear_state
        && !word_.compare_exchange_weak(w, sleeping_state,
                                        std::memory_order_acq_rel))
      continue;
    futex_wait(word_, sleeping_state, &ts);
    w = word_.load(std::memory_order_acquire);
  }
  return true;
}

} // namespace varsync::detail
