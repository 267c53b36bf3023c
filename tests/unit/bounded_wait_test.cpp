// Waiting for device work with a deadline (core/bounded_wait.hpp), against
// work that is simulated: it finishes after a number of polls, fails, or
// never finishes until it is aborted (a collective whose peer is gone).

#include <atomic>
#include <chrono>

#include <catch2/catch.hpp>

#include "core/bounded_wait.hpp"
#include "varsync/error.hpp"

using namespace std::chrono_literals;
using varsync::errc;
using varsync::has_code;
using varsync::poll_state;
using varsync::pollable_work;
using varsync::wait_clock;
using varsync::wait_for_work;

namespace {

struct fake_work {
  int polls = 0;
  int done_after = -1;   // polls until done; -1: never (until aborted)
  int fail_after = -1;   // polls until it reports an error
  int drain_after = -1;  // polls after the abort until done; -1: never
  int aborts = 0;
  int polls_at_abort = 0;

  pollable_work as_work(bool can_abort = true) {
    pollable_work w;
    w.poll = [this]() -> caf::expected<poll_state> {
      ++polls;
      if (aborts > 0)
        return drain_after >= 0 && polls - polls_at_abort >= drain_after
                 ? poll_state::done
                 : poll_state::pending;
      if (fail_after >= 0 && polls >= fail_after)
        return varsync::make_error(errc::device_error,
                                   "rank 1: remote process exited");
      if (done_after >= 0 && polls >= done_after)
        return poll_state::done;
      return poll_state::pending;
    };
    if (can_abort)
      w.abort = [this](const caf::error&) {
        ++aborts;
        polls_at_abort = polls;
      };
    return w;
  }
};

} // namespace

TEST_CASE("bounded wait: work that completes is waited for, never aborted",
          "[unit][bounded_wait]") {
  fake_work f;
  f.done_after = 200;
  auto out = wait_for_work(f.as_work(), wait_clock::now() + 10s, 100ms,
                           "the all-reduce");
  CHECK(!out.error);
  CHECK(out.drained);
  CHECK(!out.aborted);
  CHECK(f.aborts == 0);
  CHECK(f.polls == 200);
}

TEST_CASE("bounded wait: no deadline waits for slow work",
          "[unit][bounded_wait]") {
  fake_work f;
  f.done_after = 3000; // past 50 µs: the sleeping polls
  auto out = wait_for_work(f.as_work(), wait_clock::time_point::max(), 100ms,
                           "the all-reduce");
  CHECK(!out.error);
  CHECK(f.polls == 3000);
}

TEST_CASE("bounded wait: an error the work reports aborts it, and the "
          "error is returned",
          "[unit][bounded_wait]") {
  fake_work f;
  f.fail_after = 5;
  f.drain_after = 3;
  auto out = wait_for_work(f.as_work(), wait_clock::now() + 10s, 1s,
                           "the all-reduce");
  REQUIRE(out.error);
  CHECK(has_code(out.error, errc::device_error));
  CHECK(varsync::describe(out.error).find("remote process exited")
        != std::string::npos);
  CHECK(out.aborted);
  CHECK(out.drained);
  CHECK(f.aborts == 1);
}

TEST_CASE("bounded wait: work that hangs is aborted at its deadline and "
          "drains",
          "[unit][bounded_wait]") {
  fake_work f;
  f.drain_after = 2;
  const auto start = wait_clock::now();
  auto out = wait_for_work(f.as_work(), start + 30ms, 1s, "ncclAllReduce");
  const auto took = wait_clock::now() - start;
  REQUIRE(out.error);
  CHECK(has_code(out.error, errc::device_error));
  auto text = varsync::describe(out.error);
  CHECK(text.find("ncclAllReduce did not complete within its deadline")
        != std::string::npos);
  CHECK(out.aborted);
  CHECK(out.drained);
  CHECK(f.aborts == 1);
  CHECK(took >= 30ms);
}

TEST_CASE("bounded wait: work that does not drain after the abort is "
          "reported, so that its memory is never reused",
          "[unit][bounded_wait]") {
  fake_work f; // never done, never drains
  const auto start = wait_clock::now();
  auto out = wait_for_work(f.as_work(), start + 20ms, 20ms, "the kernel");
  CHECK(out.error);
  CHECK(out.aborted);
  CHECK(!out.drained);
  CHECK(wait_clock::now() - start >= 40ms);
}

TEST_CASE("bounded wait: work that cannot be aborted is reported as not "
          "drained at its deadline",
          "[unit][bounded_wait]") {
  fake_work f;
  auto out = wait_for_work(f.as_work(false), wait_clock::now() + 5ms, 1s,
                           "the copy");
  CHECK(out.error);
  CHECK(!out.aborted);
  CHECK(!out.drained);
}

TEST_CASE("bounded wait: deadline_after saturates instead of overflowing",
          "[unit][bounded_wait]") {
  using varsync::deadline_after;
  CHECK(deadline_after(std::chrono::nanoseconds::max())
        == wait_clock::time_point::max());
  auto d = deadline_after(1s);
  CHECK(d > wait_clock::now());
  CHECK(d <= wait_clock::now() + 1s);
}
