// Services mode's group commit (actors/coordinator/group_commit.hpp, P17):
// what the processes state, and what every process decides from the same
// statements.

#include <catch2/catch.hpp>

#include <cstring>
#include <vector>

#include "actors/coordinator/group_commit.hpp"
#include "varsync/error.hpp"

using namespace varsync;
using namespace varsync::group_commit;

namespace {

std::vector<std::byte> stating(uint64_t first, std::vector<entry> entries) {
  // Each process's statement arrives as the whole payload area.
  auto s = state(first, entries);
  s.resize(4096);
  return s;
}

} // namespace

TEST_CASE("group commit: the processes decide as many updates as every one "
          "holds, each applied or failed alike") {
  const std::vector<entry> five{{11, 0}, {12, 0}, {13, 0}, {14, 0}, {15, 0}};
  std::vector<entry> three(five.begin(), five.begin() + 3);
  three[1].verdict = static_cast<uint32_t>(errc::timeout);
  auto d = decide(40, {stating(40, five), stating(40, three),
                       stating(40, five)});
  REQUIRE(d);
  CHECK(d->taken == 3);
  REQUIRE(d->outcomes.size() == 3);
  CHECK(d->outcomes[0].code == 0);
  CHECK(d->outcomes[1].code == static_cast<uint32_t>(errc::timeout));
  CHECK(d->outcomes[1].process == 1);
  CHECK(d->outcomes[2].code == 0);
  auto err = failed_elsewhere(d->outcomes[1], "assign of 'w'");
  CHECK(has_code(err, errc::timeout));
  CHECK_THAT(message_of(err), Catch::Contains("process 1 failed assign of "
                                              "'w' (timeout)"));
}

TEST_CASE("group commit: an update held differently by one process fails "
          "alone, as mismatched") {
  std::vector<entry> mine{{1, 0}, {2, 0}}, theirs{{1, 0}, {9, 0}};
  auto d = decide(7, {stating(7, mine), stating(7, theirs)});
  REQUIRE(d);
  CHECK(d->taken == 2);
  CHECK(d->outcomes[0].code == 0);
  CHECK(d->outcomes[1].code
        == static_cast<uint32_t>(errc::mismatched_replica_updates));
  CHECK(d->outcomes[1].process == 1);
}

TEST_CASE("group commit: a statement no process can have meant fails the "
          "round, naming the process") {
  const std::vector<entry> one{{1, 0}};
  SECTION("another first update") {
    auto d = decide(7, {stating(7, one), stating(8, one)});
    REQUIRE_FALSE(d);
    CHECK(has_code(d.error(), errc::replica_failed));
    CHECK_THAT(message_of(d.error()), Catch::Contains("process 1"));
  }
  SECTION("no updates, or more than a round holds") {
    auto empty = stating(7, one);
    uint32_t zero = 0;
    std::memcpy(empty.data() + 8, &zero, sizeof(zero));
    CHECK_FALSE(decide(7, {stating(7, one), empty}));
    auto many = stating(7, one);
    uint32_t lots = max_operations + 1;
    std::memcpy(many.data() + 8, &lots, sizeof(lots));
    CHECK_FALSE(decide(7, {many, stating(7, one)}));
  }
  SECTION("an unknown error code") {
    auto d = decide(7, {stating(7, {{1, 250}}), stating(7, one)});
    REQUIRE_FALSE(d);
    CHECK_THAT(message_of(d.error()), Catch::Contains("unknown error code"));
  }
  SECTION("too short") {
    CHECK_FALSE(decide(7, {std::vector<std::byte>(4)}));
    CHECK_FALSE(decide(7, {}));
  }
}

TEST_CASE("group commit: a statement holds at most max_operations updates, "
          "and the fingerprint tells updates apart") {
  std::vector<entry> many(max_operations + 10, entry{1, 0});
  auto d = decide(1, {stating(1, many)});
  REQUIRE(d);
  CHECK(d->taken == max_operations);
  auto a = tensor::scalar<float>(1), b = tensor::scalar<float>(2);
  CHECK(fingerprint_of_update("w", update_op::assign, a)
        == fingerprint_of_update("w", update_op::assign, a));
  CHECK(fingerprint_of_update("w", update_op::assign, a)
        != fingerprint_of_update("w", update_op::assign, b));
  CHECK(fingerprint_of_update("w", update_op::assign, a)
        != fingerprint_of_update("w", update_op::assign_add, a));
  CHECK(fingerprint_of_update("w", update_op::assign, a)
        != fingerprint_of_update("v", update_op::assign, a));
}
