#include "devices/cuda/pinned_arena.hpp"

#include <algorithm>
#include <string>

#include <cuda_runtime.h>

#include "varsync/error.hpp"

namespace varsync {

namespace {

constexpr size_t alignment = 256;
constexpr size_t first_chunk = size_t{1} << 20;

size_t aligned(size_t n) {
  return (n + alignment - 1) / alignment * alignment;
}

} // namespace

pinned_arena::~pinned_arena() {
  if (abandoned_)
    return;
  for (auto& c : chunks_)
    cudaFreeHost(c.data);
  cudaGetLastError();
}

caf::expected<void*> pinned_arena::take(size_t nbytes) {
  const size_t want = aligned(std::max<size_t>(nbytes, 1));
  for (auto& c : chunks_)
    if (c.size - c.used >= want) {
      void* p = static_cast<char*>(c.data) + c.used;
      c.used += want;
      return p;
    }
  const size_t last = chunks_.empty() ? first_chunk / 2 : chunks_.back().size;
  chunk c;
  c.size = std::max(want, 2 * last);
  if (auto e = cudaHostAlloc(&c.data, c.size, cudaHostAllocPortable);
      e != cudaSuccess) {
    cudaGetLastError();
    return make_error(errc::out_of_memory,
                      "cannot pin " + std::to_string(c.size)
                        + " bytes of host memory for a collective's copies: "
                        + cudaGetErrorString(e));
  }
  c.used = want;
  chunks_.push_back(c);
  return c.data;
}

void pinned_arena::reset() {
  for (auto& c : chunks_)
    c.used = 0;
}

} // namespace varsync
