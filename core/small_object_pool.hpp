#pragma once
// Internal: slabs for the small objects that every variable keeps for its
// whole life (map nodes, scalar components). One pool per actor, used only
// by that actor (not thread-safe). Why: from malloc, those objects land
// among the chunks of the transient calls and messages that created them,
// and a burst of asynchronous creations leaves them scattered over pages
// held only by them. Here they share 64 KiB spans with their own kind,
// without malloc's per-chunk header, and a span whose objects are all gone
// goes back to the system.
//
// synchronized_small_object_pool is the same behind a mutex, for objects
// that threads share and any of them may free last.
//
// Sizes up to max_size bytes with alignment up to 16 come from the spans;
// anything else from the upstream resource (operator new). Under
// AddressSanitizer every request goes upstream, so that the sanitizer still
// sees each object's bounds and lifetime.

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory_resource>
#include <mutex>

#if defined(__SANITIZE_ADDRESS__)
#define VARSYNC_POOL_UPSTREAM_ONLY 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define VARSYNC_POOL_UPSTREAM_ONLY 1
#endif
#endif

namespace varsync {

class small_object_pool final : public std::pmr::memory_resource {
public:
  /// The largest size served from a span; bytes are rounded up to 8.
  static constexpr size_t max_size = 128;
  /// Bytes mapped per span; spans are aligned to it.
  static constexpr size_t span_bytes = 64 * 1024;
  /// False under AddressSanitizer: every request goes upstream.
#ifdef VARSYNC_POOL_UPSTREAM_ONLY
  static constexpr bool uses_spans = false;
#else
  static constexpr bool uses_spans = true;
#endif

  small_object_pool() = default;
  ~small_object_pool() override;
  small_object_pool(const small_object_pool&) = delete;
  small_object_pool& operator=(const small_object_pool&) = delete;

  /// Spans mapped now (each span_bytes of address space; only the pages
  /// touched are resident).
  size_t spans() const { return spans_; }
  /// Objects allocated from the spans and not yet deallocated.
  size_t objects() const { return objects_; }

private:
  struct span;
  static constexpr size_t classes = max_size / 8;

  void* do_allocate(size_t bytes, size_t alignment) override;
  void do_deallocate(void* p, size_t bytes, size_t alignment) override;
  bool do_is_equal(const std::pmr::memory_resource& other) const
    noexcept override {
    return this == &other;
  }

  /// The slot size for a request, or 0 when it goes upstream.
  static size_t slot_size(size_t bytes, size_t alignment);
  span* new_span(size_t slot);
  static void push(span*& head, span* s);
  static void remove(span*& head, span* s);
  void release_span(span* s);

  /// Per size class, the spans that have a free slot and those that are
  /// full.
  std::array<span*, classes> partial_{};
  std::array<span*, classes> full_{};
  size_t spans_ = 0;
  size_t objects_ = 0;
};

/// A small_object_pool for objects shared between threads.
class synchronized_small_object_pool final : public std::pmr::memory_resource {
public:
  size_t spans() const {
    std::lock_guard<std::mutex> guard{mtx_};
    return pool_.spans();
  }
  size_t objects() const {
    std::lock_guard<std::mutex> guard{mtx_};
    return pool_.objects();
  }

private:
  void* do_allocate(size_t bytes, size_t alignment) override {
    std::lock_guard<std::mutex> guard{mtx_};
    return pool_.allocate(bytes, alignment);
  }
  void do_deallocate(void* p, size_t bytes, size_t alignment) override {
    std::lock_guard<std::mutex> guard{mtx_};
    pool_.deallocate(p, bytes, alignment);
  }
  bool do_is_equal(const std::pmr::memory_resource& other) const
    noexcept override {
    return this == &other;
  }

  mutable std::mutex mtx_;
  small_object_pool pool_;
};

/// Bytes of every pool's spans in this process: resident at most, since
/// only the pages touched are (the benchmarks add it to malloc's heap).
size_t small_object_pools_mapped_bytes();
/// Bytes of the objects every pool in this process holds now.
size_t small_object_pools_used_bytes();

} // namespace varsync
