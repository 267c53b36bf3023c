#pragma once
// A replica's staging buffers: ON_WRITE contributions in this device's
// memory, from the step that fills them (contribution_buffer,
// update_from_device) to the collective that reads them; a recorded one
// lives until the coordinator releases its step (step_release).

#include <cstdint>
#include <unordered_map>

#include <caf/expected.hpp>

#include "devices/device.hpp"
#include "messages/replica_interface.hpp"

namespace varsync::replica_internal {

/// One ON_WRITE contribution kept in the replica's device memory.
struct staging_buffer {
  void* data = nullptr;
  size_t nbytes = 0;
  uint64_t step = 0;     // the coordinator's number of the step that made it
  uint64_t variable = 0; // the variable it was handed out for (0: a copy)
  bool recorded = false; // passed to update_from_device
  tensor host;           // host replicas: the buffer
};

class staging_buffers {
public:
  using map = std::unordered_map<uint64_t, staging_buffer>;

  /// `host_memory`: the device's memory is host memory (buffers are
  /// tensors, none is allocated on the device).
  staging_buffers(varsync::device& dev, bool host_memory)
    : device_(dev), host_memory_(host_memory) {
  }

  staging_buffers(const staging_buffers&) = delete;
  staging_buffers& operator=(const staging_buffers&) = delete;

  ~staging_buffers() {
    for (auto& [id, b] : buffers_)
      if (b.host.size() == 0 && b.data != nullptr)
        device_.release(b.data);
  }

  /// A new buffer for `info` that step `step` asked for, not recorded yet.
  caf::expected<void*> hand_out(uint64_t step, const variable_info& info);

  /// A recorded copy of `nbytes` at device memory `data` (copied on the
  /// stream, so the caller may reuse `data` at once): its id.
  caf::expected<uint64_t> record_copy(uint64_t step, const void* data,
                                      size_t nbytes);

  /// The buffer step `step` got from hand_out at `data` and has not
  /// recorded yet, or end().
  map::iterator unrecorded(const void* data, uint64_t step);

  map::iterator find(uint64_t id) { return buffers_.find(id); }
  map::iterator end() { return buffers_.end(); }
  void erase(map::iterator i) { buffers_.erase(i); }

  /// Releases the buffers of `step`: all of them, or only those the step
  /// did not record (at the end of a step whose report goes out).
  void release_step(uint64_t step, bool recorded_too);

private:
  void release(staging_buffer& b);

  varsync::device& device_;
  bool host_memory_;
  map buffers_;
  uint64_t next_id_ = 1;
};

} // namespace varsync::replica_internal
