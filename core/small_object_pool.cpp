#include "core/small_object_pool.hpp"

#include <atomic>
#include <new>

#include <sys/mman.h>
#include <unistd.h>

namespace varsync {

namespace {

constexpr size_t header_bytes = 64;
/// An empty span that is kept (the last one of its size class) gives back
/// its pages once more than this much of it was touched.
constexpr size_t keep_touched_bytes = 16 * 1024;

std::pmr::memory_resource* upstream() {
  return std::pmr::new_delete_resource();
}

std::atomic<size_t> mapped_bytes{0};
std::atomic<size_t> used_bytes{0};

} // namespace

/// At the start of each span: its slots follow, header_bytes in.
struct small_object_pool::span {
  span* prev = nullptr; // in partial_ or full_ of its size
  span* next = nullptr;
  void* free = nullptr; // freed slots, each holding the next one's address
  uint32_t slot = 0;
  uint32_t capacity = 0;
  uint32_t used = 0;
  uint32_t bumped = 0; // slots handed out from the start; the rest untouched

  char* slots() { return reinterpret_cast<char*>(this) + header_bytes; }
};

// A free slot (8 bytes at least) holds the address of the next one.
static_assert(sizeof(void*) <= 8);

size_t small_object_pools_mapped_bytes() {
  return mapped_bytes.load(std::memory_order_relaxed);
}

size_t small_object_pools_used_bytes() {
  return used_bytes.load(std::memory_order_relaxed);
}

small_object_pool::~small_object_pool() {
  // Owners declare the pool before the containers that use it; objects
  // still here were leaked, and their spans go with the pool.
  for (auto* lists : {&partial_, &full_})
    for (auto* head : *lists)
      while (head != nullptr) {
        auto* s = head;
        head = s->next;
        used_bytes.fetch_sub(size_t{s->used} * s->slot,
                             std::memory_order_relaxed);
        mapped_bytes.fetch_sub(span_bytes, std::memory_order_relaxed);
        ::munmap(s, span_bytes);
      }
}

size_t small_object_pool::slot_size(size_t bytes, size_t alignment) {
#ifdef VARSYNC_POOL_UPSTREAM_ONLY
  (void) bytes;
  (void) alignment;
  return 0;
#else
  if (bytes > max_size || alignment > 16)
    return 0;
  size_t size = bytes == 0 ? 8 : (bytes + 7) & ~size_t{7};
  if (alignment > 8)
    size = (size + 15) & ~size_t{15};
  return size;
#endif
}

void* small_object_pool::do_allocate(size_t bytes, size_t alignment) {
  auto size = slot_size(bytes, alignment);
  if (size == 0)
    return upstream()->allocate(bytes, alignment);
  auto& head = partial_[size / 8 - 1];
  if (head == nullptr)
    push(head, new_span(size));
  auto* s = head;
  void* p;
  if (s->free != nullptr) {
    p = s->free;
    s->free = *static_cast<void**>(p);
  } else {
    p = s->slots() + size_t{s->bumped} * size;
    ++s->bumped;
  }
  ++s->used;
  ++objects_;
  used_bytes.fetch_add(size, std::memory_order_relaxed);
  if (s->used == s->capacity) {
    remove(head, s);
    push(full_[size / 8 - 1], s);
  }
  return p;
}

void small_object_pool::do_deallocate(void* p, size_t bytes,
                                      size_t alignment) {
  auto size = slot_size(bytes, alignment);
  if (size == 0)
    return upstream()->deallocate(p, bytes, alignment);
  auto* s = reinterpret_cast<span*>(reinterpret_cast<uintptr_t>(p)
                                    & ~uintptr_t{span_bytes - 1});
  auto& head = partial_[size / 8 - 1];
  if (s->used == s->capacity) {
    remove(full_[size / 8 - 1], s);
    push(head, s);
  }
  *static_cast<void**>(p) = s->free;
  s->free = p;
  --s->used;
  --objects_;
  used_bytes.fetch_sub(size, std::memory_order_relaxed);
  if (s->used > 0)
    return;
  if (head != s || s->next != nullptr) {
    // Another span of this size has room: this one goes back.
    remove(head, s);
    release_span(s);
    return;
  }
  // The last span of its size stays mapped, but its pages go back once it
  // had many objects (the pool's memory follows the variables' count down).
  auto touched = header_bytes + size_t{s->bumped} * size;
  if (touched > keep_touched_bytes) {
    auto page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
    auto end = (touched + page - 1) / page * page;
    if (end > page)
      ::madvise(reinterpret_cast<char*>(s) + page, end - page, MADV_DONTNEED);
    s->free = nullptr;
    s->bumped = 0;
  }
}

small_object_pool::span* small_object_pool::new_span(size_t slot) {
  static_assert(sizeof(span) <= header_bytes);
  // Twice the size, then the unaligned ends unmapped: the span is aligned
  // to its size, so a slot finds its span by masking its address.
  void* raw = ::mmap(nullptr, 2 * span_bytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED)
    throw std::bad_alloc{};
  auto start = reinterpret_cast<uintptr_t>(raw);
  auto aligned = (start + span_bytes - 1) & ~uintptr_t{span_bytes - 1};
  if (aligned > start)
    ::munmap(raw, aligned - start);
  auto tail = aligned + span_bytes;
  auto end = start + 2 * span_bytes;
  if (end > tail)
    ::munmap(reinterpret_cast<void*>(tail), end - tail);
  auto* s = new (reinterpret_cast<void*>(aligned)) span;
  s->slot = static_cast<uint32_t>(slot);
  s->capacity = static_cast<uint32_t>((span_bytes - header_bytes) / slot);
  ++spans_;
  mapped_bytes.fetch_add(span_bytes, std::memory_order_relaxed);
  return s;
}

void small_object_pool::push(span*& head, span* s) {
  s->prev = nullptr;
  s->next = head;
  if (head != nullptr)
    head->prev = s;
  head = s;
}

void small_object_pool::remove(span*& head, span* s) {
  if (s->prev != nullptr)
    s->prev->next = s->next;
  else
    head = s->next;
  if (s->next != nullptr)
    s->next->prev = s->prev;
  s->prev = s->next = nullptr;
}

void small_object_pool::release_span(span* s) {
  --spans_;
  mapped_bytes.fetch_sub(span_bytes, std::memory_order_relaxed);
  ::munmap(s, span_bytes);
}

} // namespace varsync
