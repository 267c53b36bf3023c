#pragma once
// The memory and kernels of one replica's device. A replica actor owns exactly
// one device object and is the only caller of its methods.

#include <cstddef>
#include <memory>
#include <span>

#include <caf/error.hpp>
#include <caf/expected.hpp>

#include "varsync/tensor.hpp"
#include "varsync/device_id.hpp"
#include "varsync/synchronization.hpp"

namespace varsync {

class device {
public:
  virtual ~device() = default;

  virtual device_id id() const = 0;

  /// True if host code (the host collective, replica steps) may read and
  /// write this device's component memory directly.
  virtual bool host_accessible() const = 0;

  /// Preallocates `nbytes` for a component (out_of_memory on failure).
  virtual caf::expected<void*> allocate(size_t nbytes) = 0;
  virtual void release(void* data) = 0;

  /// Copies a host tensor into component memory of the same size.
  virtual caf::error upload(void* dst, const tensor& src) = 0;
  /// Copies component memory into a fresh host tensor.
  virtual caf::expected<tensor> download(const void* src, dtype type,
                                         const tensor_shape& shape) = 0;
  /// dst = op(dst, y) elementwise.
  virtual caf::error apply(void* dst, update_op op, const tensor& y) = 0;
  /// R4: this replica's share of x, so that all shares add up to x.
  virtual caf::error split_assign(void* dst, const tensor& x, int rank,
                                  int num_replicas) = 0;
  /// dst = op(dst, y) elementwise, where `y` holds `count` elements of `type`
  /// in this device's memory (a replica step's own buffer). Host: at once;
  /// CUDA: asynchronous on the stream (ordered before everything issued
  /// later on it).
  virtual caf::error apply_local(void* dst, update_op op, dtype type,
                                 const void* y, int64_t count) = 0;
  /// Copies `nbytes` within this device's memory (a step's buffer into a
  /// staging buffer). Host: at once; CUDA: asynchronous on the stream.
  virtual caf::error copy_local(void* dst, const void* src, size_t nbytes) = 0;

  /// Copies the rows `rows` (each `row_bytes` bytes) of the table at `src`
  /// into host memory at `out`, packed in order. Only those rows move (a
  /// sparse update of an embedding table). The default is for memory the
  /// host reaches.
  virtual caf::error read_rows(const void* src, size_t row_bytes,
                               std::span<const int64_t> rows, void* out);
  /// Writes packed host rows `in` into the table at `dst`, row j at
  /// rows[j] (distinct rows).
  virtual caf::error write_rows(void* dst, size_t row_bytes,
                                std::span<const int64_t> rows, const void* in);

  // -- asynchronous devices (CUDA); host devices keep these defaults ---------

  /// The stream that replica steps launch their kernels on, as an opaque
  /// handle (a cudaStream_t); nullptr for host devices.
  virtual void* native_stream() const { return nullptr; }
  /// Marks the end of a replica step: everything issued on the stream so
  /// far must complete before a collective touches this device's memory (a
  /// CUDA event recorded on the stream). Host devices: nothing to do.
  virtual caf::error mark_step_done() { return {}; }
  /// The event of the last mark_step_done (a cudaEvent_t), or nullptr when
  /// there is nothing to wait for.
  virtual void* step_done_event() const { return nullptr; }
  /// Orders everything issued later through this object after `event`
  /// (another object's step-done event on the same device), without a host
  /// wait. Host devices: nothing to wait for.
  virtual caf::error wait_for_event(void* event) {
    (void) event;
    return {};
  }
};

/// The device object for `id`: host devices always; other kinds through the
/// factory their backend registered (varsync::cuda registers cuda:K when it
/// is linked), device_error otherwise.
caf::expected<std::unique_ptr<device>> make_device(const device_id& id);

/// device_error: `id` is a CUDA device and the CUDA backend is not linked.
caf::error cuda_backend_missing(const device_id& id);

/// Makes the device of one kind with index K. The host library carries no
/// device backend but the host one, so that host-only programs never link
/// CUDA; a backend library registers its factory when it is loaded.
using device_factory = caf::expected<std::unique_ptr<device>> (*)(int index);

/// Registers (or, with nullptr, removes) the factory for `kind`.
void register_device_factory(device_kind kind, device_factory factory);

} // namespace varsync
