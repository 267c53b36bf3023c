#pragma once
// Waiting, with a deadline, for work that can only be asked "done yet?" (a
// CUDA stream, an NCCL communicator), and stopping it when the deadline
// passes or it reports an error. A blocking wait (cudaStreamSynchronize)
// never returns if a peer of the collective is gone: this one polls, backs
// off, aborts the work (ncclCommAbort), then gives it a grace period to
// drain. Work that does not drain may still read and write its memory: the
// caller must never reuse that memory.

#include <chrono>
#include <cstdint>
#include <functional>
#include <string_view>

#include <caf/error.hpp>
#include <caf/expected.hpp>

namespace varsync {

using wait_clock = std::chrono::steady_clock;

enum class poll_state : uint8_t { pending, done };

struct pollable_work {
  /// done, pending, or the error the work reported (it failed).
  std::function<caf::expected<poll_state>()> poll;
  /// Stops the work for good so that it drains, given why (the error the
  /// wait returns); empty when nothing can.
  std::function<void(const caf::error&)> abort;
};

struct wait_outcome {
  /// None: the work completed. Else the work's own error, or device_error
  /// naming `what` and the deadline.
  caf::error error;
  /// The work was aborted (after an error or at the deadline).
  bool aborted = false;
  /// False: after an error or the deadline the work did not drain within
  /// the grace period; its memory must never be reused.
  bool drained = true;
};

/// Polls `work` until it is done, fails, or `deadline` passes (no sleep for
/// the first 2 ms, then sleeps from 20 µs doubling to 1 ms). On an error or
/// at the deadline: abort(), then polls until the work is done or `grace`
/// has passed (errors while draining mean drained).
wait_outcome wait_for_work(const pollable_work& work,
                           wait_clock::time_point deadline,
                           std::chrono::milliseconds grace,
                           std::string_view what);

/// now + timeout, or time_point::max() for a timeout of max() (no deadline),
/// without overflowing.
wait_clock::time_point deadline_after(std::chrono::nanoseconds timeout);

} // namespace varsync
