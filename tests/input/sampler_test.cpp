// I1-I5: the sampler alone: disjoint shares that cover the epoch, the
// portable shuffle, each uneven-end policy, and bad input that changes
// nothing.

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <vector>

#include "input/epoch_order.hpp"
#include "varsync/error.hpp"
#include "varsync/ext/sampler.hpp"

using namespace varsync;
using namespace varsync::input;

namespace {

distributed_sampler make(sampler_options o, int replicas) {
  auto s = distributed_sampler::create(o, replicas);
  if (!s)
    FAIL("create: " << describe(s.error()));
  return std::move(*s);
}

/// Every step of `epoch`, joined per replica, checking that each step hands
/// a replica at most the per-replica batch size.
std::vector<std::vector<int64_t>> run_epoch(distributed_sampler& s, int64_t epoch) {
  REQUIRE_FALSE(s.begin_epoch(epoch));
  std::vector<std::vector<int64_t>> shares(static_cast<size_t>(s.num_replicas()));
  int64_t steps = 0;
  while (!s.epoch_done()) {
    auto step = s.next();
    REQUIRE(step);
    CHECK(step->step == steps++);
    for (size_t r = 0; r < shares.size(); ++r) {
      CHECK(static_cast<int64_t>(step->items[r].size()) <= s.per_replica_batch_size());
      shares[r].insert(shares[r].end(), step->items[r].begin(), step->items[r].end());
    }
  }
  return shares;
}

std::map<int64_t, int> counts(const std::vector<std::vector<int64_t>>& shares) {
  std::map<int64_t, int> out;
  for (const auto& share : shares)
    for (auto i : share)
      ++out[i];
  return out;
}

} // namespace

TEST_CASE("I1: the shares are disjoint and cover the dataset (partial)") {
  for (int replicas : {1, 2, 3, 4, 7}) {
    for (int64_t n : {1, 5, 12, 100, 101}) {
      auto s = make({.num_items = n, .global_batch_size = 2 * replicas, .seed = 9,
                     .end = uneven_end::partial}, replicas);
      auto c = counts(run_epoch(s, 0));
      REQUIRE(static_cast<int64_t>(c.size()) == n);
      for (auto [item, k] : c) {
        CHECK(item >= 0);
        CHECK(item < n);
        CHECK(k == 1);
      }
    }
  }
}

TEST_CASE("I2: splitmix64 gives its reference outputs") {
  // Vigna's splitmix64.c seeded with 0.
  splitmix64 g{0};
  CHECK(g.next() == 0xE220A8397B1DCDAFull);
  CHECK(g.next() == 0x6E789E6AA1B965F4ull);
  CHECK(g.next() == 0x06C45D188009454Full);
}

TEST_CASE("I2: the epoch order is a permutation fixed by (seed, epoch)") {
  auto a = epoch_order(1000, 42, 3, true);
  CHECK(a == epoch_order(1000, 42, 3, true));
  CHECK(a != epoch_order(1000, 42, 4, true));
  CHECK(a != epoch_order(1000, 43, 3, true));
  auto sorted = a;
  std::sort(sorted.begin(), sorted.end());
  CHECK(sorted == epoch_order(1000, 0, 0, false));
  CHECK(a != sorted);
  // Pinned (computed from docs/input.md's description by an independent
  // script): the same order on every platform and in every release.
  CHECK(epoch_order(10, 1, 0, true)
        == std::vector<int64_t>{1, 7, 5, 6, 2, 0, 4, 8, 3, 9});
}

TEST_CASE("I2: two samplers with the same options hand out the same steps") {
  sampler_options o{.num_items = 257, .global_batch_size = 12, .seed = 77,
                    .end = uneven_end::pad};
  auto a = make(o, 4);
  auto b = make(o, 4);
  for (int64_t e = 0; e < 3; ++e)
    CHECK(run_epoch(a, e) == run_epoch(b, e));
}

TEST_CASE("I3: drop: full batches only, the remainder dropped") {
  auto s = make({.num_items = 23, .global_batch_size = 6, .seed = 1,
                 .end = uneven_end::drop}, 3);
  REQUIRE_FALSE(s.begin_epoch(0));
  int steps = 0;
  std::set<int64_t> seen;
  while (!s.epoch_done()) {
    auto step = s.next();
    REQUIRE(step);
    ++steps;
    for (const auto& b : step->items) {
      CHECK(b.size() == 2);
      seen.insert(b.begin(), b.end());
    }
  }
  CHECK(steps == 3);          // 23 / 6
  CHECK(seen.size() == 18);   // 5 items dropped, none repeated
  CHECK(s.position().offset == 23);
}

TEST_CASE("I3: pad: full batches, the last filled from the epoch's start") {
  auto s = make({.num_items = 10, .global_batch_size = 8, .seed = 5,
                 .end = uneven_end::pad}, 4);
  auto shares = run_epoch(s, 2);
  auto c = counts(shares);
  CHECK(c.size() == 10);
  for (const auto& share : shares)
    CHECK(share.size() == 4); // 2 steps of 2
  const auto order = epoch_order(10, 5, 2, true);
  // Positions 10 .. 15 repeat the order's first six items.
  for (int i = 0; i < 6; ++i)
    CHECK(c[order[static_cast<size_t>(i)]] == 2);
  for (int i = 6; i < 10; ++i)
    CHECK(c[order[static_cast<size_t>(i)]] == 1);
}

TEST_CASE("I3: partial: uneven last batches, each item once") {
  auto s = make({.num_items = 11, .global_batch_size = 8, .shuffle = false,
                 .end = uneven_end::partial}, 4);
  REQUIRE_FALSE(s.begin_epoch(0));
  auto first = s.next();
  REQUIRE(first);
  CHECK(first->items == std::vector<std::vector<int64_t>>{{0, 4}, {1, 5}, {2, 6}, {3, 7}});
  auto last = s.next();
  REQUIRE(last);
  CHECK(last->items == std::vector<std::vector<int64_t>>{{8}, {9}, {10}, {}});
  CHECK(last->global_count() == 3);
  CHECK(s.epoch_done());
}

TEST_CASE("I4: a new epoch, a new order, and an epoch's seed is used once") {
  auto s = make({.num_items = 50, .seed = 3}, 2);
  auto e0 = run_epoch(s, 0);
  auto e1 = run_epoch(s, 1);
  CHECK(e0 != e1);
  const auto before = s.position();
  for (int64_t reused : {0, 1}) {
    auto err = s.begin_epoch(reused);
    CHECK(has_code(err, errc::invalid_argument));
    CHECK(message_of(err).find("already drawn") != std::string::npos);
  }
  CHECK(has_code(s.begin_epoch(-1), errc::invalid_argument));
  CHECK(s.position().epoch == before.epoch);
  CHECK(s.position().offset == before.offset);
  CHECK_FALSE(s.begin_epoch(5)); // skipping ahead is allowed
}

TEST_CASE("I5: bad input is an error value naming what was expected") {
  auto expect = [](auto result, const char* text) {
    REQUIRE_FALSE(result);
    CHECK(has_code(result.error(), errc::invalid_argument));
    CHECK_THAT(message_of(result.error()), Catch::Contains(text));
  };
  expect(distributed_sampler::create({.num_items = 10}, 0), "at least one replica");
  expect(distributed_sampler::create({.num_items = 10}, -2), "at least one replica");
  expect(distributed_sampler::create({.num_items = 0}, 2), "dataset is empty");
  expect(distributed_sampler::create({.num_items = 10, .global_batch_size = 10}, 4),
         "not divisible by the 4 replicas");
  expect(distributed_sampler::create({.num_items = 10, .global_batch_size = -4}, 4),
         "global batch size of at least 1");
  expect(distributed_sampler::create({.num_items = 3, .global_batch_size = 4,
                                      .end = uneven_end::drop}, 4),
         "no global batch of 4");
  expect(distributed_sampler::create({.num_items = 3,
                                      .end = static_cast<uneven_end>(7)}, 1),
         "not drop, pad or partial");
  expect(per_replica_batch_size(10, 4), "expected a multiple of 4");
  expect(per_replica_batch_size(8, 0), "at least one replica");
  CHECK(*per_replica_batch_size(8, 4) == 2);
}

TEST_CASE("I5: next outside an epoch fails and changes nothing") {
  auto s = make({.num_items = 4, .global_batch_size = 4}, 2);
  auto none = s.next();
  REQUIRE_FALSE(none);
  CHECK_THAT(message_of(none.error()), Catch::Contains("begin_epoch first"));
  REQUIRE_FALSE(s.begin_epoch(0));
  REQUIRE(s.next());
  auto over = s.next();
  REQUIRE_FALSE(over);
  CHECK_THAT(message_of(over.error()), Catch::Contains("begin_epoch(1)"));
  CHECK(s.position().step == 1);
  CHECK(s.position().offset == 4);
}
