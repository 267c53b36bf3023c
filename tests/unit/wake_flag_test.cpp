// The flag a blocking caller sleeps on (core/wake_flag.hpp): set before or
// after the wait, a deadline that passes, and the set value published to the
// woken thread.

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "core/wake_flag.hpp"

using varsync::detail::wake_flag;
using namespace std::chrono_literals;

TEST_CASE("wake_flag: set before the wait returns at once", "[unit][wake_flag]") {
  wake_flag flag;
  CHECK_FALSE(flag.is_set());
  flag.set();
  CHECK(flag.is_set());
  flag.wait();
  CHECK(flag.wait_until(std::chrono::steady_clock::now() - 1s));
}

TEST_CASE("wake_flag: a sleeping waiter wakes when another thread sets it",
          "[unit][wake_flag]") {
  wake_flag flag;
  int value = 0; // plain: the flag must publish it
  std::thread setter{[&] {
    std::this_thread::sleep_for(20ms);
    value = 42;
    flag.set();
  }};
  flag.wait();
  CHECK(value == 42);
  setter.join();
}

TEST_CASE("wake_flag: wait_until gives up at its deadline, and a later set "
          "still wakes the next wait",
          "[unit][wake_flag]") {
  wake_flag flag;
  auto t0 = std::chrono::steady_clock::now();
  CHECK_FALSE(flag.wait_until(t0 + 30ms));
  CHECK(std::chrono::steady_clock::now() - t0 >= 30ms);
  CHECK_FALSE(flag.is_set());
  std::thread setter{[&] {
    std::this_thread::sleep_for(10ms);
    flag.set();
  }};
  CHECK(flag.wait_until(std::chrono::steady_clock::now() + 60s));
  setter.join();
}

TEST_CASE("wake_flag: many hand-offs between two threads, none lost",
          "[unit][wake_flag]") {
  // Each round a fresh flag, set at once or after the waiter slept: a lost
  // wake-up hangs here (the test's timeout names it).
  constexpr int rounds = 20000;
  std::vector<std::unique_ptr<wake_flag>> flags(rounds);
  for (auto& f : flags)
    f = std::make_unique<wake_flag>();
  std::atomic<int> next{0};
  std::thread setter{[&] {
    for (int i = 0; i < rounds; ++i) {
      while (next.load(std::memory_order_acquire) <= i)
        std::this_thread::yield();
      if (i % 7 == 0)
        std::this_thread::sleep_for(10us);
      flags[static_cast<size_t>(i)]->set();
    }
  }};
  for (int i = 0; i < rounds; ++i) {
    next.store(i + 1, std::memory_order_release);
    if (i % 2 == 0)
      flags[static_cast<size_t>(i)]->wait();
    else
      REQUIRE(flags[static_cast<size_t>(i)]->wait_until(
        std::chrono::steady_clock::now() + 60s));
  }
  setter.join();
}
