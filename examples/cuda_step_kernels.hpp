#pragma once
// The user kernels of examples/cuda_step.cpp, behind plain C++ functions so
// that the example's main compiles with the C++ compiler (streams as void*,
// cast to cudaStream_t in the .cu file).

#include <cstdint>

namespace example {

/// grad[i] = 0.5f * w[i] + (replica + 1), on `stream`.
int launch_gradient(float* grad, const float* w, int64_t n, int replica,
                    void* stream);

/// acc[i] += grad[i], on `stream`.
int launch_accumulate(float* acc, const float* grad, int64_t n, void* stream);

} // namespace example
