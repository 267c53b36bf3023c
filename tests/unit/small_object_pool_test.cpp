// The slab pool behind the per-variable objects (core/small_object_pool.hpp):
// every size and alignment it serves, what goes upstream, spans given back,
// and the slots' contents kept apart under random use. Under
// AddressSanitizer the pool sends everything upstream; the content checks
// still run, the span counts do not apply.

#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <memory_resource>
#include <random>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/small_object_pool.hpp"

using namespace varsync;

namespace {

struct block {
  void* p;
  size_t bytes;
  size_t align;
  unsigned char fill;
};

void fill(const block& b) {
  std::memset(b.p, b.fill, b.bytes);
}

bool intact(const block& b) {
  auto* c = static_cast<const unsigned char*>(b.p);
  for (size_t i = 0; i < b.bytes; ++i)
    if (c[i] != b.fill)
      return false;
  return true;
}

} // namespace

TEST_CASE("small_object_pool serves every size up to max_size, aligned",
          "[unit][small_object_pool]") {
  small_object_pool pool;
  std::vector<block> blocks;
  unsigned char n = 1;
  for (size_t align : {size_t{1}, size_t{8}, size_t{16}})
    for (size_t bytes = 1; bytes <= small_object_pool::max_size; ++bytes)
      for (int copy = 0; copy < 3; ++copy) {
        block b{pool.allocate(bytes, align), bytes, align, n++};
        REQUIRE(b.p != nullptr);
        CHECK(reinterpret_cast<uintptr_t>(b.p) % align == 0);
        fill(b);
        blocks.push_back(b);
      }
  for (auto& b : blocks)
    CHECK(intact(b));
  if constexpr (small_object_pool::uses_spans) {
    CHECK(pool.objects() == blocks.size());
    // One span per slot size (8 to 128 bytes in steps of 8).
    CHECK(pool.spans() == small_object_pool::max_size / 8);
  }
  for (auto& b : blocks)
    pool.deallocate(b.p, b.bytes, b.align);
  CHECK(pool.objects() == 0);
}

TEST_CASE("small_object_pool sends large and over-aligned requests upstream",
          "[unit][small_object_pool]") {
  small_object_pool pool;
  void* big = pool.allocate(small_object_pool::max_size + 1, 8);
  void* aligned = pool.allocate(16, 64);
  CHECK(reinterpret_cast<uintptr_t>(aligned) % 64 == 0);
  std::memset(big, 1, small_object_pool::max_size + 1);
  CHECK(pool.objects() == 0);
  CHECK(pool.spans() == 0);
  pool.deallocate(big, small_object_pool::max_size + 1, 8);
  pool.deallocate(aligned, 16, 64);
}

TEST_CASE("small_object_pool gives spans back as their objects go",
          "[unit][small_object_pool]") {
  small_object_pool pool;
  constexpr size_t count = 20000; // about 18 spans of 56-byte slots
  std::vector<void*> ps;
  auto used0 = small_object_pools_used_bytes();
  for (size_t i = 0; i < count; ++i)
    ps.push_back(pool.allocate(56, 8));
  if constexpr (small_object_pool::uses_spans) {
    auto per_span = (small_object_pool::span_bytes - 64) / 56;
    CHECK(pool.spans() == (count + per_span - 1) / per_span);
    CHECK(small_object_pools_used_bytes() - used0 == count * 56);
  }
  // Every other object first: no span empties, none goes back.
  for (size_t i = 0; i < count; i += 2)
    pool.deallocate(ps[i], 56, 8);
  auto spans_half = pool.spans();
  if constexpr (small_object_pool::uses_spans)
    CHECK(spans_half > 1);
  // The freed slots are reused before any new span.
  for (size_t i = 0; i < count; i += 2)
    ps[i] = pool.allocate(56, 8);
  CHECK(pool.spans() == spans_half);
  for (auto* p : ps)
    pool.deallocate(p, 56, 8);
  CHECK(pool.objects() == 0);
  if constexpr (small_object_pool::uses_spans) {
    // The last span of the size stays mapped, its pages given back.
    CHECK(pool.spans() == 1);
    CHECK(small_object_pools_used_bytes() == used0);
  }
}

TEST_CASE("small_object_pool keeps slots apart under random use",
          "[unit][small_object_pool]") {
  small_object_pool pool;
  std::mt19937 rng{20261124};
  std::uniform_int_distribution<size_t> size_of(1, 160);
  std::vector<block> live;
  unsigned char n = 0;
  for (int round = 0; round < 200000; ++round) {
    // Phases that grow and phases that shrink the live set.
    bool growing = (round / 20000) % 2 == 0;
    bool add = live.empty() || (growing ? rng() % 4 != 0 : rng() % 4 == 0);
    if (add) {
      size_t bytes = size_of(rng);
      size_t align = rng() % 2 == 0 ? 8 : 16;
      block b{pool.allocate(bytes, align), bytes, align, ++n};
      REQUIRE(reinterpret_cast<uintptr_t>(b.p) % align == 0);
      fill(b);
      live.push_back(b);
    } else {
      auto i = rng() % live.size();
      REQUIRE(intact(live[i]));
      pool.deallocate(live[i].p, live[i].bytes, live[i].align);
      live[i] = live.back();
      live.pop_back();
    }
  }
  for (auto& b : live) {
    CHECK(intact(b));
    pool.deallocate(b.p, b.bytes, b.align);
  }
  CHECK(pool.objects() == 0);
}

TEST_CASE("a map whose nodes come from small_object_pool",
          "[unit][small_object_pool]") {
  small_object_pool pool;
  {
    std::pmr::unordered_map<uint64_t, uint64_t> m{&pool};
    for (uint64_t i = 0; i < 10000; ++i)
      m.emplace(i, i * 3);
    for (uint64_t i = 0; i < 10000; ++i)
      REQUIRE(m.at(i) == i * 3);
    if constexpr (small_object_pool::uses_spans)
      CHECK(pool.objects() == 10000); // the nodes; the buckets go upstream
    for (uint64_t i = 0; i < 10000; i += 2)
      m.erase(i);
    CHECK(m.size() == 5000);
  }
  CHECK(pool.objects() == 0);
}

TEST_CASE("synchronized_small_object_pool frees on any thread",
          "[unit][small_object_pool]") {
  synchronized_small_object_pool pool;
  // Each thread frees what the previous one allocated, as a shared
  // description is freed by whichever owner lets it go last.
  constexpr int threads = 4;
  constexpr int per_thread = 5000;
  std::vector<std::vector<void*>> made(threads);
  for (int t = 0; t < threads; ++t)
    for (int i = 0; i < per_thread; ++i)
      made[static_cast<size_t>(t)].push_back(pool.allocate(96, 8));
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t)
    ts.emplace_back([&, t] {
      for (auto* p : made[static_cast<size_t>((t + 1) % threads)])
        pool.deallocate(p, 96, 8);
      for (int i = 0; i < per_thread; ++i)
        pool.deallocate(pool.allocate(24, 8), 24, 8);
    });
  for (auto& t : ts)
    t.join();
  CHECK(pool.objects() == 0);
  if constexpr (small_object_pool::uses_spans)
    CHECK(pool.spans() <= 2);
}
