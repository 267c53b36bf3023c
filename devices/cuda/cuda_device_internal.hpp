#pragma once
// The CUDA side of cuda_device, for the backend's own .cpp files only
// (devices/cuda/, sync/nccl/): it includes cuda_runtime.h.

#include <span>
#include <string_view>

#include <caf/error.hpp>
#include <caf/expected.hpp>
#include <cuda_runtime.h>

#include "core/bounded_wait.hpp"

#include "devices/cuda/cuda_device.hpp"
#include "devices/cuda/cuda_kernels.hpp"

namespace varsync::cuda {

/// The stream of `dev` (non-blocking, on GPU dev.index()).
inline cudaStream_t stream_of(const cuda_device& dev) {
  return static_cast<cudaStream_t>(dev.native_stream());
}

/// out_of_memory for cudaErrorMemoryAllocation, device_error otherwise:
/// "cuda:K: <what>: <cudaErrorName> (<description>)".
caf::error make_cuda_error(int device, std::string_view what, cudaError_t e);

/// One poll of streams[i] on GPU gpus[i] (cudaStreamQuery, no wait): done
/// when all have finished their work, pending while one has not, else the
/// CUDA error, naming `what`.
caf::expected<poll_state> query_streams(std::span<const int> gpus,
                                        std::span<const cudaStream_t> streams,
                                        std::string_view what);

/// Makes GPU `device` current for the calling thread for the guard's
/// lifetime and restores the previous device afterwards.
class device_guard {
public:
  explicit device_guard(int device);
  ~device_guard();
  device_guard(const device_guard&) = delete;
  device_guard& operator=(const device_guard&) = delete;
  /// cudaSuccess if the device was selected.
  cudaError_t status() const { return status_; }

private:
  int previous_ = -1;
  cudaError_t status_ = cudaSuccess;
};

} // namespace varsync::cuda
