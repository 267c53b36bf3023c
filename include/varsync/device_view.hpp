#pragma once
// What a replica step gets to work on its local components where they live:
// a view of component memory on the replica's device (host memory for cpu:K,
// GPU memory for cuda:K) and the replica's stream, both without CUDA types so
// that this header compiles everywhere. CUDA code casts the stream with
// varsync/ext/cuda_stream.hpp.

#include <cstddef>
#include <cstdint>

#include "varsync/dtype.hpp"
#include "varsync/tensor.hpp"
#include "varsync/device_id.hpp"

namespace varsync {

/// A replica's local component in its device's memory. Valid until the step
/// returns. `data` is a device pointer on a cuda:K replica: dereference it
/// only in kernels launched on the replica's stream (replica_context::stream)
/// or ordered after it.
///
/// Writing through `data` is allowed for ON_READ and NONE variables (their
/// components are local, R1 / N1). ON_WRITE components must change only
/// through replica_context::update, or the replicas drift apart (W7).
struct device_view {
  dtype type = dtype::float32;
  const tensor_shape* shape = nullptr;
  void* data = nullptr;
  int64_t size = 0;
  device_id device;

  /// The data as T (T must have the dtype's width: uint16_t for float16 and
  /// bfloat16, float, double, int32_t, int64_t); nullptr if it has not.
  template <class T>
  T* as() const {
    return sizeof(T) == size_of(type) ? static_cast<T*>(data) : nullptr;
  }
  size_t nbytes() const { return static_cast<size_t>(size) * size_of(type); }
  /// True if host code may dereference `data` (cpu:K replicas).
  bool host_accessible() const { return device.kind == device_kind::host; }
};

/// A replica's stream as an opaque handle: a cudaStream_t on cuda:K
/// replicas, null on host replicas (their steps run synchronously).
struct stream_handle {
  void* native = nullptr;
  explicit operator bool() const { return native != nullptr; }
};

} // namespace varsync
