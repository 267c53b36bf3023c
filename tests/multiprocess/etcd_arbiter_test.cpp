// The arbiter across hosts (actors/cluster/etcd_arbiter) against a real
// etcd on loopback (etcd_server.hpp), and services mode's fencing under it
// (P16): two arbiters of one key in this process are two clients, as two
// processes' would be.

#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "actors/cluster/arbiter.hpp"
#include "actors/cluster/etcd_arbiter.hpp"
#include "etcd_server.hpp"
#include "fenced_scenario.hpp"
#include "spawn_processes.hpp"
#include "varsync/error.hpp"

using namespace varsync;
using namespace std::chrono_literals;
using varsync::testing::etcd_server;
using varsync::testing::free_loopback_port;
using varsync::testing::run_children;

namespace {

std::unique_ptr<arbiter> open_as(const etcd_server& etcd,
                                 const std::string& key, int rank,
                                 std::chrono::milliseconds lease) {
  auto a = open_arbiter(etcd.arbiter(key), "", rank, lease);
  INFO((a ? std::string{} : describe(a.error())));
  REQUIRE(a);
  return std::move(*a);
}

bool has(const caf::error& err, errc code, const std::string& words) {
  return has_code(err, code)
         && message_of(err).find(words) != std::string::npos;
}

} // namespace

TEST_CASE("etcd arbiter: one holder at a time: a candidate is refused while "
          "the holder's lease runs, the holder renews, and a release hands "
          "the lead over at once") {
  etcd_server etcd;
  INFO(etcd.log());
  REQUIRE(etcd.ready());
  auto a = open_as(etcd, "/t/one", 0, 1s);
  auto b = open_as(etcd, "/t/one", 1, 1s);
  auto none = a->current();
  REQUIRE(none);
  CHECK(none->epoch == 0);
  auto first = a->try_acquire();
  REQUIRE(first);
  CHECK(*first > 0);
  auto lead = b->current();
  REQUIRE(lead);
  CHECK(lead->epoch == *first);
  CHECK(lead->rank == 0);
  CHECK(lead->pid == ::getpid());
  CHECK(lead->alive);
  // The holder keeps its lead well past one lease by renewing it.
  for (int i = 0; i < 6; ++i) {
    std::this_thread::sleep_for(300ms);
    CHECK(!a->renew(*first));
    auto refused = b->try_acquire();
    CHECK(has(refused.error(), errc::replica_failed, "whose lease runs"));
  }
  // Holding it already is not an error.
  auto again = a->try_acquire();
  REQUIRE(again);
  CHECK(*again == *first);
  a->release(*first);
  auto second = b->try_acquire();
  REQUIRE(second);
  CHECK(*second > *first);
  CHECK(has(a->renew(*first), errc::fenced, "is not this process's"));
  b->release(*second);
}

TEST_CASE("etcd arbiter: a holder that stops renewing loses the lead when "
          "its lease runs out, and is fenced when it wakes") {
  etcd_server etcd;
  INFO(etcd.log());
  REQUIRE(etcd.ready());
  auto a = open_as(etcd, "/t/stop", 0, 1s);
  auto b = open_as(etcd, "/t/stop", 1, 1s);
  auto first = a->try_acquire();
  REQUIRE(first);
  // Not renewed: etcd drops the key once the lease ran out.
  caf::expected<uint64_t> second{caf::error{}};
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  do {
    std::this_thread::sleep_for(100ms);
    second = b->try_acquire();
  } while (!second && std::chrono::steady_clock::now() < deadline);
  REQUIRE(second);
  CHECK(*second > *first);
  auto fenced = a->renew(*first);
  CHECK(has(fenced, errc::fenced, "fenced: epoch " + std::to_string(*first)));
  CHECK(has(fenced, errc::fenced,
            "the lead is in epoch " + std::to_string(*second) + ", process 1"));
  // Fenced for good: its epoch is not its own any more.
  CHECK(has_code(a->renew(*first), errc::fenced));
  CHECK(!b->renew(*second));
  // A holder that goes away without releasing (a join that failed after
  // taking the lead) lets a candidate take it at once.
  b.reset();
  auto c = open_as(etcd, "/t/stop", 2, 60s);
  auto third = c->try_acquire();
  REQUIRE(third);
  CHECK(*third > *second);
}

TEST_CASE("etcd arbiter: bad options and an etcd that does not answer are "
          "refused with clear errors") {
  CHECK(has(etcd_arbiter::open({"127.0.0.1", 2379, {"", 0, 1s}}).error(),
            errc::invalid_argument, "expected a host, a key"));
  CHECK(has(etcd_arbiter::open({"127.0.0.1", 2379, {"/k", -1, 1s}}).error(),
            errc::invalid_argument, "rank -1"));
  CHECK(has(etcd_arbiter::open({"127.0.0.1", 2379, {"/k", 0, 0s}}).error(),
            errc::invalid_argument, "lease 0 ms"));
  // A port nothing listens on.
  const auto port = static_cast<uint16_t>(free_loopback_port());
  auto unreachable = etcd_arbiter::open({"127.0.0.1", port, {"/k", 0, 1s}});
  CHECK(has(unreachable.error(), errc::replica_failed, "cannot connect"));
  CHECK(has(open_arbiter("etcd:http://127.0.0.1:notaport", "", 0, 1s).error(),
            errc::invalid_argument, "etcd:http://<host>:<port>"));
}

TEST_CASE("multiprocess strategy: P16: services mode under an etcd arbiter: "
          "a process 0 that stopped past its lease while another process "
          "took the lead wakes up fenced, and orders nothing") {
  etcd_server etcd;
  INFO(etcd.log());
  REQUIRE(etcd.ready());
  const auto arbiter = etcd.arbiter("/varsync/test/fenced");
  auto port = free_loopback_port();
  REQUIRE(port > 0);
  auto children = varsync::testing::fenced_scenario(arbiter, port);
  auto r = run_children(children, 120s);
  REQUIRE(r.spawned);
  CHECK(r.exit_codes == std::vector<int>{0, 0, 0, 0});
}
