// The arbiter on one host (actors/cluster/host_arbiter): who may order a
// strategy's operations, decided by the kernel's locks. Two arbiters of one
// file in this process are two open file descriptions, whose OFD locks
// conflict as two processes' would; a forked holder shows a real death.

#include <catch2/catch.hpp>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include <sys/wait.h>
#include <unistd.h>

#include "actors/cluster/host_arbiter.hpp"
#include "varsync/error.hpp"

using namespace varsync;
using namespace std::chrono_literals;

namespace {

std::string fresh_path(const std::string& what) {
  auto p = std::filesystem::path{"/dev/shm"}
           / ("varsync-arbiter-test-" + std::to_string(getpid()) + "-"
              + what);
  std::filesystem::remove(p);
  return p.string();
}

std::unique_ptr<host_arbiter> open_as(const std::string& path, int rank,
                                      std::chrono::milliseconds lease) {
  auto a = host_arbiter::open({path, rank, lease});
  REQUIRE(a);
  return std::move(*a);
}

bool has(const caf::error& err, errc code, const std::string& words) {
  return has_code(err, code)
         && message_of(err).find(words) != std::string::npos;
}

} // namespace

TEST_CASE("host arbiter: one holder at a time: a candidate is refused while "
          "the holder lives and its lease runs, and the holder renews") {
  auto path = fresh_path("one");
  auto a = open_as(path, 0, 10s);
  auto b = open_as(path, 1, 10s);
  auto first = a->try_acquire();
  REQUIRE(first);
  CHECK(*first == 1);
  auto refused = b->try_acquire();
  REQUIRE_FALSE(refused);
  CHECK(has(refused.error(), errc::replica_failed,
            "process 0 (pid " + std::to_string(getpid())
              + ") leads in epoch 1"));
  auto now = b->current();
  REQUIRE(now);
  CHECK(now->epoch == 1);
  CHECK(now->rank == 0);
  CHECK(now->alive);
  CHECK(now->leased);
  CHECK_FALSE(a->renew(1));
  auto again = a->try_acquire(); // the holder asking again: its epoch
  REQUIRE(again);
  CHECK(*again == 1);
  std::filesystem::remove(path);
}

TEST_CASE("host arbiter: a holder that died gives the lead up at once, "
          "whatever its lease, and one that released it too") {
  auto path = fresh_path("died");
  auto b = open_as(path, 1, 10s);
  auto pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    auto a = host_arbiter::open({path, 0, std::chrono::milliseconds{60000}});
    if (!a || !(*a)->try_acquire())
      _exit(1);
    std::raise(SIGKILL); // the kernel drops its locks
    _exit(2);
  }
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFSIGNALED(status));
  auto dead = b->current();
  REQUIRE(dead);
  CHECK(dead->epoch == 1);
  CHECK(dead->rank == 0);
  CHECK(dead->pid == pid);
  CHECK_FALSE(dead->alive);
  CHECK(dead->leased); // 60 s, yet:
  auto second = b->try_acquire();
  REQUIRE(second);
  CHECK(*second == 2);
  // An orderly exit: the lead is free at once.
  auto c = open_as(path, 2, 10s);
  b->release(2);
  auto third = c->try_acquire();
  REQUIRE(third);
  CHECK(*third == 3);
  std::filesystem::remove(path);
}

TEST_CASE("host arbiter: a holder that stops answering loses the lead when "
          "its lease runs out, and is fenced when it wakes") {
  auto path = fresh_path("stopped");
  auto a = open_as(path, 0, 200ms);
  auto b = open_as(path, 1, 200ms);
  REQUIRE(a->try_acquire());
  REQUIRE_FALSE(b->try_acquire()); // alive, leased
  std::this_thread::sleep_for(300ms); // a "stopped": alive, lease over
  auto now = b->current();
  REQUIRE(now);
  CHECK(now->alive);
  CHECK_FALSE(now->leased);
  auto taken = b->try_acquire();
  REQUIRE(taken);
  CHECK(*taken == 2);
  // The old holder wakes: epoch 1 is gone, and it says so.
  auto fenced = a->renew(1);
  CHECK(has(fenced, errc::fenced, "fenced: epoch 1"));
  CHECK(has(fenced, errc::fenced, "the lead is in epoch 2, process 1"));
  CHECK(has(a->try_acquire().error(), errc::replica_failed,
            "leads in epoch 2"));
  CHECK_FALSE(b->renew(2));
  std::filesystem::remove(path);
}

TEST_CASE("host arbiter: bad options and a foreign file are refused and "
          "change nothing") {
  CHECK(has(host_arbiter::open({"", 0, 1s}).error(), errc::invalid_argument,
            "expected a file path"));
  CHECK(has(host_arbiter::open({fresh_path("neg"), -1, 1s}).error(),
            errc::invalid_argument, "rank -1"));
  CHECK(has(host_arbiter::open({fresh_path("zero"), 0, 0s}).error(),
            errc::invalid_argument, "lease 0 ms"));
  auto path = fresh_path("foreign");
  {
    std::ofstream out{path};
    out << "not an arbiter, but somebody's data";
  }
  CHECK(has(host_arbiter::open({path, 0, 1s}).error(), errc::invalid_argument,
            "holds something else"));
  std::ifstream in{path};
  std::string text{std::istreambuf_iterator<char>{in}, {}};
  CHECK(text == "not an arbiter, but somebody's data");
  CHECK(has(host_arbiter::open({"/nonexistent-dir/arbiter", 0, 1s}).error(),
            errc::invalid_argument, "cannot open"));
  std::filesystem::remove(path);
}
