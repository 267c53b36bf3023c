// Reliability: thousands of small variables. What each keeps for its life
// (table nodes, scalar components, its description) comes from slab pools
// (core/small_object_pool.hpp), and destroying the variables gives those
// pools' spans back, all but the last of each size (docs/memory.md). Under
// AddressSanitizer the pools hand everything to malloc: the variables are
// still created, checked and destroyed, the pool counts do not apply.

#include "../semantics/fixture.hpp"

#include <string>
#include <vector>

#include "core/small_object_pool.hpp"

using namespace vs_test;

TEST_CASE("M1: 20,000 scalar variables live in the slab pools, and destroying "
          "them gives the pools' spans back",
          "[reliability][memory]") {
  constexpr int replicas = 4;
  constexpr int count = 20000;
  constexpr size_t span = small_object_pool::span_bytes;
  auto s = make_host_strategy(replicas);
  auto used0 = small_object_pools_used_bytes();
  auto mapped0 = small_object_pools_mapped_bytes();
  std::vector<variable> vs;
  for (int i = 0; i < count; ++i) {
    auto v = s.create_variable("v/" + std::to_string(i),
                               tensor::scalar<float>(static_cast<float>(i)),
                               synchronization::on_write, aggregation::sum);
    if (!v)
      FAIL("create_variable failed: " << describe(v.error()));
    vs.push_back(*v);
  }
  auto used = small_object_pools_used_bytes() - used0;
  auto mapped = small_object_pools_mapped_bytes() - mapped0;
  if constexpr (small_object_pool::uses_spans) {
    // Per variable at least: a table node (56 bytes) and a component (32)
    // in each replica, two nodes in the coordinator.
    CHECK(used >= size_t{count} * (replicas * (56 + 32) + 56 + 40));
    CHECK(mapped >= used);
  }
  // The pooled components hold the values.
  for (int i : {0, 1, count / 2, count - 1}) {
    CHECK(read_scalar(s, vs[static_cast<size_t>(i)]) == i);
    VS_REQUIRE_OK(s.assign(vs[static_cast<size_t>(i)],
                           tensor::scalar<float>(-1.0f)));
    CHECK(all_components_equal(s, vs[static_cast<size_t>(i)]));
  }
  for (auto& v : vs)
    VS_REQUIRE_OK(s.destroy(v));
  // The handles share the descriptions: they go with the last handle.
  auto with_handles = small_object_pools_used_bytes() - used0;
  vs.clear();
  CHECK(small_object_pools_used_bytes() == used0);
  if constexpr (small_object_pool::uses_spans)
    CHECK(with_handles <= size_t{count} * small_object_pool::max_size);
  if constexpr (small_object_pool::uses_spans) {
    // One span per size stays in each pool (nodes, small bucket arrays,
    // components, descriptions: 16 spans here), whatever the count was.
    auto kept = small_object_pools_mapped_bytes() - mapped0;
    CHECK(kept <= 24 * span);
    CHECK(kept * 4 < mapped);
  }
  // New variables reuse what is left.
  auto again = s.create_variable("again", tensor::scalar<float>(2),
                                 synchronization::on_write, aggregation::sum);
  if (!again)
    FAIL("create_variable failed: " << describe(again.error()));
  CHECK(read_scalar(s, *again) == 2.0);
}
