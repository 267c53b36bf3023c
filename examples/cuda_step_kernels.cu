#include "cuda_step_kernels.hpp"

#include <cuda_runtime.h>

namespace example {

namespace {

__global__ void gradient_kernel(float* grad, const float* w, int64_t n,
                                float offset) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
       i < n; i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    grad[i] = __fadd_rn(__fmul_rn(0.5f, w[i]), offset);
}

__global__ void accumulate_kernel(float* acc, const float* grad, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
       i < n; i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    acc[i] = __fadd_rn(acc[i], grad[i]);
}

unsigned blocks_for(int64_t n) {
  int64_t b = (n + 255) / 256;
  return static_cast<unsigned>(b < 1 ? 1 : (b > 65535 ? 65535 : b));
}

} // namespace

int launch_gradient(float* grad, const float* w, int64_t n, int replica,
                    void* stream) {
  gradient_kernel<<<blocks_for(n), 256, 0, static_cast<cudaStream_t>(stream)>>>(
    grad, w, n, static_cast<float>(replica + 1));
  return static_cast<int>(cudaGetLastError());
}

int launch_accumulate(float* acc, const float* grad, int64_t n, void* stream) {
  accumulate_kernel<<<blocks_for(n), 256, 0,
                      static_cast<cudaStream_t>(stream)>>>(acc, grad, n);
  return static_cast<int>(cudaGetLastError());
}

} // namespace example
