// A replica's staging buffers: handing them out, recording copies, and
// releasing them with their step.

#include "actors/replica/replica_staging.hpp"

#include <utility>

namespace varsync::replica_internal {

caf::expected<void*> staging_buffers::hand_out(uint64_t step,
                                               const variable_info& info) {
  staging_buffer b;
  b.step = step;
  b.variable = info.id;
  b.nbytes = static_cast<size_t>(element_count(info.shape))
             * size_of(info.type);
  if (host_memory_) {
    b.host = tensor::empty(info.type, info.shape);
    b.data = b.host.mutable_raw();
  } else {
    auto mem = device_.allocate(b.nbytes);
    if (!mem)
      return std::move(mem.error());
    b.data = *mem;
  }
  void* data = b.data;
  buffers_.emplace(next_id_++, std::move(b));
  return data;
}

caf::expected<uint64_t> staging_buffers::record_copy(uint64_t step,
                                                     const void* data,
                                                     size_t nbytes) {
  staging_buffer b;
  b.step = step;
  b.nbytes = nbytes;
  b.recorded = true;
  auto mem = device_.allocate(b.nbytes);
  if (!mem)
    return std::move(mem.error());
  b.data = *mem;
  if (auto err = device_.copy_local(b.data, data, b.nbytes)) {
    device_.release(b.data);
    return err;
  }
  auto id = next_id_++;
  buffers_.emplace(id, std::move(b));
  return id;
}

staging_buffers::map::iterator
staging_buffers::unrecorded(const void* data, uint64_t step) {
  for (auto i = buffers_.begin(); i != buffers_.end(); ++i)
    if (i->second.data == data && !i->second.recorded
        && i->second.step == step)
      return i;
  return buffers_.end();
}

void staging_buffers::release(staging_buffer& b) {
  if (!host_memory_ && b.data != nullptr)
    device_.release(b.data);
  b.data = nullptr;
}

void staging_buffers::release_step(uint64_t step, bool recorded_too) {
  for (auto i = buffers_.begin(); i != buffers_.end();) {
    if (i->second.step == step && (recorded_too || !i->second.recorded)) {
      release(i->second);
      i = buffers_.erase(i);
    } else {
      ++i;
    }
  }
}

} // namespace varsync::replica_internal
