#pragma once
// A one-shot flag that one thread sleeps on until another sets it: a futex
// word, no mutex. With a mutex and condition variable, an answer that comes
// while the waiter still holds the mutex (on its way into the wait) puts the
// answering thread to sleep on the mutex, and the hand-off costs two wake-ups
// instead of one. No spinning: on 2 cores a spinning waiter takes the CPU the
// answering threads need.

#include <atomic>
#include <chrono>
#include <cstdint>

namespace varsync::detail {

class wake_flag {
public:
  /// Sets the flag and wakes the waiter, if one sleeps. Call once.
  void set() noexcept;

  /// Sleeps until set() was called.
  void wait() noexcept;

  /// Sleeps until set() was called (true) or `deadline` passed (false).
  bool wait_until(std::chrono::steady_clock::time_point deadline) noexcept;

  bool is_set() const noexcept {
    return word_.load(std::memory_order_acquire) == set_state;
  }

private:
  static constexpr uint32_t clear_state = 0;
  static constexpr uint32_t sleeping_state = 1; // a waiter may be in the kernel
  static constexpr uint32_t set_state = 2;

  std::atomic<uint32_t> word_{clear_state};
};

} // namespace varsync::detail
