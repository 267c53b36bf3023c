#pragma once
// Page-locked host memory for the copies of a collective run. A
// cudaMemcpyAsync from or to pageable memory returns only once the stream's
// earlier work is done: behind NCCL work whose peer is gone, that is never.
// From pinned memory it is queued like any other work. A bump allocator over
// chunks that only grow: reset() once the run's copies are done. No chunk is
// freed before the arena goes (cudaFreeHost synchronizes the device), and
// none at all after abandon(). No CUDA header here; one caller.

#include <cstddef>
#include <vector>

#include <caf/expected.hpp>

namespace varsync {

class pinned_arena {
public:
  pinned_arena() = default;
  ~pinned_arena();
  pinned_arena(const pinned_arena&) = delete;
  pinned_arena& operator=(const pinned_arena&) = delete;

  /// `nbytes` of pinned memory (256-byte aligned) until reset();
  /// out_of_memory when the host refuses a new chunk.
  caf::expected<void*> take(size_t nbytes);
  /// Everything taken is free again (the caller waited for its copies).
  void reset();
  /// Copies that may never finish still use the chunks: they are never
  /// freed (the memory is lost until the process exits).
  void abandon() { abandoned_ = true; }

private:
  struct chunk {
    void* data = nullptr;
    size_t size = 0;
    size_t used = 0;
  };
  std::vector<chunk> chunks_;
  bool abandoned_ = false;
};

} // namespace varsync
