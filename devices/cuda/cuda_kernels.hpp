#pragma once
// Elementwise CUDA kernels of the CUDA backend, with the exact semantics of
// devices/host_kernels.hpp (bit for bit: same operation order, float16 and
// bfloat16 computed in float32 and rounded to nearest even with the host's
// NaN handling, integer arithmetic wrapping, floating min/max propagating NaN,
// R4 integer split with floor division). The .cu file is compiled with
// --fmad=false so that no multiply-add is contracted.
//
// This header includes CUDA types: include it only from the backend's .cu and
// .cpp files (devices/cuda/, sync/nccl/), never from public varsync headers.
// It includes no CAF header, so nvcc never sees CAF.
//
// Every launch is asynchronous on `stream`, on the current CUDA device (the
// caller selects it with cudaSetDevice), and returns the launch error (not
// the execution error). Pointers are device pointers readable from that
// device. Pointer lists hold at most `max_kernel_pointers` entries.

#include <cstdint>

#include <cuda_runtime.h>

#include "varsync/dtype.hpp"

namespace varsync {

// Opaque declarations of varsync/synchronization.hpp's enums (which include
// CAF).
enum class reduce_op : uint8_t;
enum class update_op : uint8_t;

namespace cuda {

// The enumerator values of reduce_op / update_op that the .cu file relies on
// (it cannot see the full enums; cuda_device.cpp static_asserts them).
namespace op_code {
constexpr uint8_t sum = 0, mean = 1, min = 2, max = 3, prod = 4;
constexpr uint8_t assign = 0, assign_add = 1, assign_sub = 2;
} // namespace op_code

/// Most inputs / components one reduce or reduce_and_apply launch takes.
constexpr int max_kernel_pointers = 64;

/// dst[i] = op(dst[i], y[i]) for i in [0, n). `dst` may equal `y`.
cudaError_t launch_apply_update(update_op op, dtype t, void* dst, const void* y,
                                int64_t n, cudaStream_t stream);

/// out[i] = op(inputs[0][i], ..., inputs[k-1][i]), inputs combined in order;
/// mean = sum / k (floating only). `out` may be one of the inputs.
/// `inputs` is a host array of `num_inputs` device pointers.
cudaError_t launch_reduce(reduce_op op, dtype t, void* out,
                          const void* const* inputs, int num_inputs, int64_t n,
                          cudaStream_t stream);

/// host::reduce_and_apply on one device: y = reduce(contributions) rounded to
/// `t` (the single contribution itself when there is one), then
/// c[i] = uop(c[i], y) for every component. Components must not alias
/// contributions or each other. Host arrays of device pointers. `mirrored`:
/// the components hold equal values (ON_WRITE), so the new value is computed
/// once from component 0 and stored to all (host::reduce_and_apply_mirrored).
cudaError_t launch_reduce_and_apply(reduce_op rop, update_op uop, dtype t,
                                    const void* const* contributions,
                                    int num_contributions,
                                    void* const* components, int num_components,
                                    bool mirrored, int64_t n,
                                    cudaStream_t stream);

/// R4: dst = this replica's share of x (floor-division split for integers,
/// x / N for floating dtypes). `dst` may equal `x`. Requires
/// 0 <= rank < num_replicas (cudaErrorInvalidValue otherwise).
cudaError_t launch_split_assign(dtype t, void* dst, const void* x, int64_t n,
                                int rank, int num_replicas,
                                cudaStream_t stream);

/// data[i] = data[i] / divisor, computed in the dtype's arithmetic (float for
/// the 16-bit types, floor division for integers): the "mean after sum" step
/// of a collective.
cudaError_t launch_divide(dtype t, void* data, int64_t divisor, int64_t n,
                          cudaStream_t stream);

/// data[i] = data[i] * factor (float for the 16-bit types; floating dtypes
/// only, cudaErrorInvalidValue for integers).
cudaError_t launch_scale(dtype t, void* data, double factor, int64_t n,
                         cudaStream_t stream);

/// 16-bit reductions over NCCL in float32 (NCCL's own float16 / bfloat16
/// sums round at every hop and overflow where the host's do not): out[i] =
/// op over inputs[0..k)[i] loaded as float, combined in order, not rounded
/// (k == 1: the input widened). `t` is float16 or bfloat16; op is sum or
/// prod (a mean is widened as a sum and divided by launch_narrow); anything
/// else is cudaErrorInvalidValue. Host array of device pointers.
cudaError_t launch_reduce_widen(reduce_op op, dtype t, float* out,
                                const void* const* inputs, int num_inputs,
                                int64_t n, cudaStream_t stream);
/// ... and back: out[i] = in[i] / divisor (divisor 1: no division) rounded
/// once to `t` (float16 or bfloat16), the host's rounding and NaN bits.
/// `out` must not overlap `in`.
cudaError_t launch_narrow(dtype t, void* out, const float* in,
                          int64_t divisor, int64_t n, cudaStream_t stream);

/// NaN propagation for NCCL's min and max, which drop NaN where the host
/// kernels propagate it: mask[i] = 1 where data[i] is NaN (floating dtypes;
/// cudaErrorInvalidValue for integers) ...
cudaError_t launch_nan_mask(dtype t, const void* data, uint8_t* mask,
                            int64_t n, cudaStream_t stream);
/// ... and, after the masks were max-reduced too, data[i] = a quiet NaN
/// where mask[i] is set.
cudaError_t launch_apply_nan_mask(dtype t, void* data, const uint8_t* mask,
                                  int64_t n, cudaStream_t stream);

/// Row gather: packed[j * row_bytes ...] = src row rows[j], for j in
/// [0, num_rows). `rows` is a device array. Copies whole words when the row
/// size allows.
cudaError_t launch_gather_rows(void* packed, const void* src, size_t row_bytes,
                               const int64_t* rows, int64_t num_rows,
                               cudaStream_t stream);

/// Row scatter: dst row rows[j] = packed[j * row_bytes ...]. The rows must
/// be distinct.
cudaError_t launch_scatter_rows(void* dst, const void* packed, size_t row_bytes,
                                const int64_t* rows, int64_t num_rows,
                                cudaStream_t stream);

/// V4 on the device: *first = the smallest i in [0, n) at which the
/// integer reduction of inputs[0..k) (exact in int64), applied to
/// component[i] by `uop` (none when `component` is null), does not fit `t`
/// (elem::overflows_at, the host check's own code). The caller sets *first
/// to all ones before; it stays so when nothing overflows. int32 and int64
/// only (cudaErrorInvalidValue otherwise). Host array of device pointers.
cudaError_t launch_first_overflow(reduce_op rop, update_op uop, dtype t,
                                  const void* const* inputs, int num_inputs,
                                  const void* component, int64_t n,
                                  unsigned long long* first,
                                  cudaStream_t stream);

/// W4 on the device: *first = the smallest j >= 1 such that inputs[j]
/// differs from inputs[0] in any bit of its n elements. The caller sets
/// *first to all ones before; it stays so when every input is equal.
cudaError_t launch_first_unequal(dtype t, const void* const* inputs,
                                 int num_inputs, int64_t n,
                                 unsigned int* first, cudaStream_t stream);

} // namespace cuda
} // namespace varsync
