#pragma once
// CUDA-only helper for replica steps that launch their own kernels: the
// replica's stream as a cudaStream_t. Include it only in code built with the
// CUDA backend (it includes cuda_runtime.h); the rest of varsync's public API
// carries the stream as an opaque stream_handle.
//
//   s.run([&](replica_context& ctx) {
//     varsync::use_replica_gpu(ctx);                // the replica's GPU
//     auto w = ctx.device_pointer(v);               // component on the GPU
//     my_kernel<<<blocks, threads, 0, varsync::cuda_stream(ctx)>>>(w->as<float>(), w->size);
//   });
//
// Kernels launched on this stream are ordered before the step's collective
// (the replica records a CUDA event at the end of the step and the
// collective's streams wait for it) and before every later operation on the
// replica, which use the same stream.

#include <cuda_runtime.h>

#include <caf/expected.hpp>

#include "varsync/replica_context.hpp"

namespace varsync {

/// The cudaStream_t behind `h` (nullptr, the legacy default stream, for a
/// host replica's null handle: check the handle first).
inline cudaStream_t cuda_stream(stream_handle h) {
  return static_cast<cudaStream_t>(h.native);
}

/// The stream of the replica running `ctx`.
inline cudaStream_t cuda_stream(const replica_context& ctx) {
  return cuda_stream(ctx.stream());
}

/// Makes the replica's GPU the calling thread's current CUDA device (replica
/// steps run on scheduler threads, whose current device is whatever the
/// thread used last): call it before launching kernels or allocating in a
/// step. cudaErrorInvalidValue on a host replica.
inline cudaError_t use_replica_gpu(const replica_context& ctx) {
  auto d = ctx.device();
  if (d.kind != device_kind::cuda)
    return cudaErrorInvalidValue;
  return cudaSetDevice(d.index);
}

/// The number of CUDA GPUs this process can use: 0 on a machine without one
/// (cudaErrorNoDevice, or no CUDA driver installed at all), a device_error for
/// any other CUDA failure (a driver too old for the runtime, missing device
/// nodes), so that a broken GPU machine is not mistaken for one without a GPU.
caf::expected<int> cuda_gpu_count();

} // namespace varsync
