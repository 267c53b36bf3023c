#include "core/bounded_wait.hpp"

#include <algorithm>
#include <string>
#include <thread>

#include "varsync/error.hpp"

namespace varsync {

namespace {

using namespace std::chrono_literals;

/// How long a wait polls without sleeping. A GPU step's work is done
/// within microseconds to a millisecond or two of the host asking, and a
/// sleep overshoots by tens of microseconds (the timer slack): spinning
/// that long keeps the wait within a microsecond of the work. The waiter
/// runs on a thread of its own and yields while it spins.
constexpr auto spin_for = 2ms;

/// Polls until done, an error, or `until`: spinning for spin_for, then
/// sleeping from 20 µs doubling to 1 ms between polls.
caf::expected<poll_state> poll_until(const pollable_work& work,
                                     wait_clock::time_point until) {
  const auto start = wait_clock::now();
  auto pause = std::chrono::microseconds{20};
  for (;;) {
    auto state = work.poll();
    if (!state || *state == poll_state::done)
      return state;
    const auto now = wait_clock::now();
    if (now >= until)
      return poll_state::pending;
    if (now - start < spin_for) {
      std::this_thread::yield();
      continue;
    }
    std::this_thread::sleep_for(
      std::min<wait_clock::duration>(pause, until - now));
    pause = std::min(pause * 2, std::chrono::microseconds{1000});
  }
}

} // namespace

wait_clock::time_point deadline_after(std::chrono::nanoseconds timeout) {
  const auto now = wait_clock::now();
  if (timeout >= wait_clock::time_point::max() - now)
    return wait_clock::time_point::max();
  return now + std::chrono::duration_cast<wait_clock::duration>(timeout);
}

wait_outcome wait_for_work(const pollable_work& work,
                           wait_clock::time_point deadline,
                           std::chrono::milliseconds grace,
                           std::string_view what) {
  const auto started = wait_clock::now();
  wait_outcome out;
  auto state = poll_until(work, deadline);
  if (state && *state == poll_state::done)
    return out;
  if (!state) {
    out.error = std::move(state.error());
  } else {
    const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(
      wait_clock::now() - started);
    out.error = make_error(errc::device_error,
                           std::string{what} + " did not complete within its "
                             "deadline (waited "
                             + std::to_string(waited.count()) + " ms)");
  }
  if (!work.abort) {
    out.drained = false;
    return out;
  }
  work.abort(out.error);
  out.aborted = true;
  auto drained = poll_until(work, deadline_after(grace));
  out.drained = !drained || *drained == poll_state::done;
  return out;
}

} // namespace varsync
