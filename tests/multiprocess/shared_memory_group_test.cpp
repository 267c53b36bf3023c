// The shared memory group (sync/shm): processes forked from the test, one
// per rank; the test process is rank 0 and checks every child's exit
// status. A child reports what went wrong on stderr and exits non-zero.

#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sync/shm/shared_memory_group.hpp"
#include "varsync/error.hpp"

using namespace varsync;
using namespace std::chrono_literals;

namespace {

using rank_body = std::function<bool(shared_memory_group&)>;

using layout = shared_memory_group_options::layout;

shared_memory_group_options options_for(int rank, int size,
                                        size_t slot_bytes = 4096,
                                        layout how = layout::automatic) {
  shared_memory_group_options o;
  o.rank = rank;
  o.size = size;
  o.slot_bytes = slot_bytes;
  o.timeout = 20s;
  o.chunk_layout = how;
  return o;
}

struct children {
  std::vector<pid_t> pids;
  // Reaps every child; true if each exited with 0.
  bool all_passed() {
    bool ok = true;
    for (auto pid : pids) {
      int status = 0;
      waitpid(pid, &status, 0);
      ok = ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
    }
    pids.clear();
    return ok;
  }
  ~children() {
    for (auto pid : pids) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
  }
};

// Rank 0 (this process) creates the segment; ranks 1 .. size-1 are forked
// and open it; every rank runs `body`. The children's results come back
// as exit statuses.
bool run_ranks(int size, const rank_body& body, size_t slot_bytes = 4096,
               layout how = layout::automatic) {
  auto g0 = shared_memory_group::create(options_for(0, size, slot_bytes, how));
  REQUIRE(g0);
  children kids;
  for (int r = 1; r < size; ++r) {
    auto pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      auto g = shared_memory_group::open((*g0)->name(),
                                         options_for(r, size, slot_bytes,
                                                     how));
      if (!g) {
        std::fprintf(stderr, "rank %d: %s\n", r,
                     describe(g.error()).c_str());
        _exit(2);
      }
      bool ok = body(**g);
      std::fflush(stderr);
      _exit(ok ? 0 : 1); // no destructors: the parent owns the segment
    }
    kids.pids.push_back(pid);
  }
  bool mine = body(**g0);
  (*g0)->unlink();
  bool theirs = kids.all_passed();
  CHECK(mine);
  return mine && theirs;
}

bool report(bool ok, int rank, const char* what) {
  if (!ok)
    std::fprintf(stderr, "rank %d: %s\n", rank, what);
  return ok;
}

} // namespace

TEST_CASE("shared memory group: all_reduce over 3 processes, in chunks, "
          "gives every rank the same sums, minima and means") {
  // Either way of moving a chunk (sliced: each rank keeps its own slice in
  // place; whole: all of it through the segment).
  const auto how = GENERATE(layout::sliced, layout::whole);
  CAPTURE(how == layout::sliced ? "sliced" : "whole");
  CHECK(run_ranks(3, [](shared_memory_group& g) {
    const int r = g.rank();
    // 10,007 float32 values: 10 chunks of 4 KiB, the last one short.
    std::vector<float> x(10007);
    for (size_t i = 0; i < x.size(); ++i)
      x[i] = static_cast<float>(i % 7 + r);
    auto sum = x;
    if (g.all_reduce(reduce_op::sum, dtype::float32, sum.data(),
                     static_cast<int64_t>(sum.size())))
      return report(false, r, "sum failed");
    for (size_t i = 0; i < x.size(); ++i)
      if (sum[i] != static_cast<float>(3 * (i % 7) + 3))
        return report(false, r, "wrong sum");
    auto mean = x;
    if (g.all_reduce(reduce_op::mean, dtype::float32, mean.data(),
                     static_cast<int64_t>(mean.size())))
      return report(false, r, "mean failed");
    for (size_t i = 0; i < x.size(); ++i)
      if (mean[i] != static_cast<float>(3 * (i % 7) + 3) / 3.0f)
        return report(false, r, "wrong mean");
    std::vector<int64_t> y(1500);
    for (size_t i = 0; i < y.size(); ++i)
      y[i] = static_cast<int64_t>(i) * (r == 1 ? -1 : 1);
    if (g.all_reduce(reduce_op::min, dtype::int64, y.data(),
                     static_cast<int64_t>(y.size())))
      return report(false, r, "min failed");
    for (size_t i = 0; i < y.size(); ++i)
      if (y[i] != -static_cast<int64_t>(i))
        return report(false, r, "wrong min");
    // Fewer elements than ranks: some slices are empty.
    for (int64_t n : {1, 2, 4}) {
      std::vector<double> z(static_cast<size_t>(n), r + 1.0);
      if (g.all_reduce(reduce_op::sum, dtype::float64, z.data(), n))
        return report(false, r, "short sum failed");
      for (auto v : z)
        if (v != 6.0)
          return report(false, r, "wrong short sum");
    }
    return true;
  }, 4096, how));
}

TEST_CASE("shared memory group: ranks that arrive late find the others "
          "asleep and wake them, with as many ranks as cores and with more") {
  // Each round, one rank arrives 20 ms after the others: they have spun,
  // yielded and gone to sleep on the futex by then, and its arrival must
  // wake them. 2 ranks spin first; 5 ranks outnumber CI's cores and sleep
  // almost at once.
  for (int size : {2, 5}) {
    CAPTURE(size);
    CHECK(run_ranks(size, [size](shared_memory_group& g) {
      const int r = g.rank();
      for (int round = 0; round < 2 * size; ++round) {
        if (round % size == r)
          std::this_thread::sleep_for(20ms);
        std::vector<int32_t> x(3000, r + round);
        if (g.all_reduce(reduce_op::sum, dtype::int32, x.data(),
                         static_cast<int64_t>(x.size())))
          return report(false, r, "sum failed");
        const int32_t want = size * round + size * (size - 1) / 2;
        for (auto v : x)
          if (v != want)
            return report(false, r, "wrong sum");
      }
      return true;
    }));
  }
}

TEST_CASE("shared memory group: ranks held on one core take turns there "
          "and every sum is right") {
  // Both ranks on the same core, as a wake-up from a socket can leave two
  // processes for milliseconds: a waiter sees that the rank it waits for
  // last ran on its core and yields it (bench/process_strategy shows the
  // time; this shows the turns stay correct).
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  REQUIRE(sched_getaffinity(0, sizeof(allowed), &allowed) == 0);
  int core = 0;
  while (!CPU_ISSET(core, &allowed))
    ++core;
  CHECK(run_ranks(2, [core](shared_memory_group& g) {
    const int r = g.rank();
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(core, &one);
    cpu_set_t before;
    sched_getaffinity(0, sizeof(before), &before);
    if (sched_setaffinity(0, sizeof(one), &one) != 0)
      return report(false, r, "cannot pin to one core");
    bool ok = true;
    for (int round = 0; round < 2000 && ok; ++round) {
      std::vector<int32_t> x(64, r + round);
      if (g.all_reduce(reduce_op::sum, dtype::int32, x.data(),
                       static_cast<int64_t>(x.size())))
        ok = report(false, r, "sum failed");
      else
        for (auto v : x)
          if (v != 2 * round + 1)
            ok = report(false, r, "wrong sum");
    }
    sched_setaffinity(0, sizeof(before), &before);
    return ok;
  }));
}

TEST_CASE("shared memory group: broadcast and all_gather over 4 processes, "
          "in chunks") {
  CHECK(run_ranks(4, [](shared_memory_group& g) {
    const int r = g.rank();
    std::vector<uint8_t> b(9000, static_cast<uint8_t>(r == 2 ? 0 : 1));
    for (size_t i = 0; r == 2 && i < b.size(); ++i)
      b[i] = static_cast<uint8_t>(i * 31);
    if (g.broadcast(b.data(), b.size(), 2))
      return report(false, r, "broadcast failed");
    for (size_t i = 0; i < b.size(); ++i)
      if (b[i] != static_cast<uint8_t>(i * 31))
        return report(false, r, "wrong broadcast");
    std::vector<uint8_t> in(5000, static_cast<uint8_t>(10 + r));
    std::vector<uint8_t> out(4 * in.size(), 0);
    if (g.all_gather(in.data(), out.data(), in.size()))
      return report(false, r, "all_gather failed");
    for (size_t i = 0; i < out.size(); ++i)
      if (out[i] != static_cast<uint8_t>(10 + i / in.size()))
        return report(false, r, "wrong all_gather");
    return true;
  }));
}

TEST_CASE("shared memory group: an integer sum that does not fit fails with "
          "overflow on every rank, and the group stays usable") {
  const auto how = GENERATE(layout::sliced, layout::whole);
  CAPTURE(how == layout::sliced ? "sliced" : "whole");
  CHECK(run_ranks(3, [](shared_memory_group& g) {
    const int r = g.rank();
    std::vector<int32_t> x(3000, 1);
    x[2999] = std::numeric_limits<int32_t>::max() / 2 + 1; // 3 of them: over
    auto err = g.all_reduce(reduce_op::sum, dtype::int32, x.data(), 3000);
    if (!has_code(err, errc::overflow)
        || message_of(err).find("int32") == std::string::npos)
      return report(false, r, "expected overflow naming int32");
    int32_t one = 1;
    if (g.all_reduce(reduce_op::sum, dtype::int32, &one, 1) || one != 3)
      return report(false, r, "the group is not usable after overflow");
    return true;
  }, 4096, how));
}

TEST_CASE("shared memory group: bad input is refused and changes nothing") {
  CHECK(run_ranks(2, [](shared_memory_group& g) {
    const int r = g.rank();
    int32_t v = 5;
    if (!has_code(g.all_reduce(reduce_op::mean, dtype::int32, &v, 1),
                  errc::invalid_argument)
        || v != 5)
      return report(false, r, "an integer mean was not refused");
    if (!has_code(g.all_reduce(reduce_op::sum, dtype::float32, nullptr, 3),
                  errc::invalid_argument))
      return report(false, r, "a null buffer was not refused");
    if (!has_code(g.broadcast(&v, sizeof(v), 2), errc::invalid_argument))
      return report(false, r, "a bad root was not refused");
    if (g.all_reduce(reduce_op::sum, dtype::int32, &v, 1) || v != 10)
      return report(false, r, "the group is not usable after refusals");
    return true;
  }));
}

TEST_CASE("shared memory group: ranks that run different collectives fail "
          "on every rank, naming it") {
  CHECK(run_ranks(2, [](shared_memory_group& g) {
    const int r = g.rank();
    std::vector<float> x(r == 0 ? 100 : 200, 1.0f);
    auto err = g.all_reduce(reduce_op::sum, dtype::float32, x.data(),
                            static_cast<int64_t>(x.size()));
    if (!has_code(err, errc::replica_failed)
        || message_of(err).find("different collective") == std::string::npos)
      return report(false, r, "expected replica_failed naming the mismatch");
    float y = 1;
    if (!has_code(g.all_reduce(reduce_op::sum, dtype::float32, &y, 1),
                  errc::replica_failed))
      return report(false, r, "the group must be unusable after a failure");
    return true;
  }));
}

TEST_CASE("shared memory group: a rank that exits fails the others' "
          "collective at once, naming it, and one that never comes fails it "
          "at the deadline") {
  auto g0 = shared_memory_group::create(options_for(0, 2));
  REQUIRE(g0);
  auto pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    auto g = shared_memory_group::open((*g0)->name(), options_for(1, 2));
    _exit(g ? 0 : 2); // exits without taking part
  }
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid); // reaped: the pid is gone
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  float x = 1;
  auto err = (*g0)->all_reduce(reduce_op::sum, dtype::float32, &x, 1);
  CHECK(has_code(err, errc::replica_failed));
  // Named as exited, not as late: the deadline's message says "did not
  // arrive within".
  CHECK(message_of(err).find("rank 1 (process " + std::to_string(pid)
                             + ") exited")
        != std::string::npos);
  // A rank that never arrives: the deadline, naming it.
  auto o = options_for(0, 2);
  o.timeout = 300ms;
  auto lone = shared_memory_group::create(o);
  REQUIRE(lone);
  auto o1 = options_for(1, 2);
  auto other = shared_memory_group::open((*lone)->name(), o1); // same process
  REQUIRE(other);
  auto late = (*lone)->all_reduce(reduce_op::sum, dtype::float32, &x, 1);
  CHECK(has_code(late, errc::replica_failed));
  CHECK(message_of(late).find("rank(s) 1 did not arrive within 300 ms")
        != std::string::npos);
}

TEST_CASE("shared memory group: a wait ends when the strategy gives up") {
  auto o = options_for(0, 2);
  int polls = 0;
  o.abandon = [&polls]() -> caf::error {
    if (++polls < 3)
      return {};
    return make_error(errc::replica_failed, "process 1 left the strategy");
  };
  auto g = shared_memory_group::create(o);
  REQUIRE(g);
  auto other = shared_memory_group::open((*g)->name(), options_for(1, 2));
  REQUIRE(other);
  float x = 1;
  auto err = (*g)->all_reduce(reduce_op::sum, dtype::float32, &x, 1);
  CHECK(has_code(err, errc::replica_failed));
  CHECK(message_of(err).find("process 1 left the strategy")
        != std::string::npos);
}

TEST_CASE("shared memory group: opening checks the segment, the ranks and "
          "the name") {
  auto bad_rank = shared_memory_group::create(options_for(1, 2));
  CHECK(has_code(bad_rank.error(), errc::invalid_argument));
  auto bad_slot = shared_memory_group::create(options_for(0, 2, 100));
  CHECK(has_code(bad_slot.error(), errc::invalid_argument));
  auto missing = shared_memory_group::open("/varsync-no-such-segment",
                                           options_for(1, 2));
  REQUIRE(!missing);
  CHECK(message_of(missing.error()).find("not on rank 0's host")
        != std::string::npos);
  auto g = shared_memory_group::create(options_for(0, 3));
  REQUIRE(g);
  auto wrong_size = shared_memory_group::open((*g)->name(), options_for(1, 2));
  REQUIRE(!wrong_size);
  CHECK(message_of(wrong_size.error()).find("another group")
        != std::string::npos);
  auto rank0 = shared_memory_group::open((*g)->name(), options_for(0, 3));
  CHECK(has_code(rank0.error(), errc::invalid_argument));
  (*g)->unlink();
  auto gone = shared_memory_group::open((*g)->name(), options_for(1, 3));
  CHECK(!gone); // unlinked: nothing left under the name
}

// Run by the CTest test shared_memory_group.full_dev_shm, inside a mount
// namespace whose /dev/shm holds 1 MiB.
TEST_CASE("a /dev/shm too small for a shared memory group's segment is "
          "refused when the group is created",
          "[.full-shm]") {
  auto g = shared_memory_group::create(options_for(0, 4, size_t{2} << 20));
  REQUIRE(!g);
  CHECK(has_code(g.error(), errc::out_of_memory));
  CHECK(message_of(g.error()).find("cannot reserve") != std::string::npos);
}
