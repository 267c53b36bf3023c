// CUDA kernels of the CUDA backend (see cuda_kernels.hpp). The element kinds
// and the arithmetic are host_kernels.cpp's own functions
// (devices/element_ops.hpp, compiled __host__ __device__): the storage type,
// the compute type, the conversions and the operations are the same code,
// and the float operations round to nearest even on the GPU as on the host
// (the _rn intrinsics; this file is also compiled with --fmad=false, IEEE
// division and no flush-to-zero). float16 and bfloat16 are stored as their 16-bit patterns
// (the layout of __half / __nv_bfloat16) and computed in float; the
// conversions are the host's rather than __float2half_rn /
// __float2bfloat16_rn so that NaN results carry the same bits as on the host.

#include "devices/cuda/cuda_kernels.hpp"

#include "devices/element_ops.hpp"

#include <algorithm>
#include <cstdint>
#include <type_traits>

namespace varsync::cuda {

namespace {

// -- element kinds and arithmetic: devices/element_ops.hpp, shared with the
//    host kernels (the same functions, compiled __host__ __device__) --------

using elem::bfloat_kind;
using elem::half_kind;
using elem::native;
using elem::op_diff;
using elem::op_max;
using elem::op_min;
using elem::op_prod;
using elem::op_sum;
using elem::fdiv;
using elem::fmul;
using elem::split_int;

/// Calls f(kind{}) for the element kind of `t`.
template <class F>
cudaError_t dispatch(dtype t, F&& f) {
  switch (t) {
    case dtype::float16: return f(half_kind{});
    case dtype::bfloat16: return f(bfloat_kind{});
    case dtype::float32: return f(native<float>{});
    case dtype::float64: return f(native<double>{});
    case dtype::int32: return f(native<int32_t>{});
    case dtype::int64: return f(native<int64_t>{});
  }
  return cudaErrorInvalidValue;
}

/// c = uop(c, y) on storage values, as host update_range: assign copies the
/// bits of y, add/sub compute in the compute type and round.
template <class K>
__device__ __forceinline__ typename K::storage
update_value(uint8_t uop, typename K::storage c, typename K::storage y) {
  if (uop == op_code::assign)
    return y;
  if (uop == op_code::assign_add)
    return K::store(op_sum{}(K::load(c), K::load(y)));
  return K::store(op_diff{}(K::load(c), K::load(y)));
}

// -- kernels ------------------------------------------------------------------

template <class P>
struct ptr_list {
  P p[max_kernel_pointers];
};

constexpr int threads = 256;

inline int blocks_for(int64_t n) {
  const int64_t b = (n + threads - 1) / threads;
  return static_cast<int>(std::min<int64_t>(b, 8192));
}

#define VARSYNC_GRID_LOOP(i, n)                                                \
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; \
       i < (n); i += static_cast<int64_t>(blockDim.x) * gridDim.x)

template <class K, class Op>
__global__ void update_kernel(Op op, typename K::storage* dst,
                              const typename K::storage* y, int64_t n) {
  VARSYNC_GRID_LOOP(i, n) {
    dst[i] = K::store(op(K::load(dst[i]), K::load(y[i])));
  }
}

/// acc = op over inputs[0..k)[i] in compute precision, in order; mean divides.
template <class K, class Op, bool Mean>
__device__ __forceinline__ typename K::compute
reduce_element(Op op, const ptr_list<const void*>& in, int k, int64_t i) {
  using S = typename K::storage;
  using C = typename K::compute;
  C acc = K::load(static_cast<const S*>(in.p[0])[i]);
  for (int j = 1; j < k; ++j)
    acc = op(acc, K::load(static_cast<const S*>(in.p[j])[i]));
  if constexpr (Mean)
    acc = fdiv(acc, static_cast<C>(k));
  return acc;
}

template <class K, class Op, bool Mean>
__global__ void reduce_kernel(Op op, typename K::storage* out,
                              ptr_list<const void*> in, int k, int64_t n) {
  VARSYNC_GRID_LOOP(i, n) {
    out[i] = K::store(reduce_element<K, Op, Mean>(op, in, k, i));
  }
}

template <class K, class Op, bool Mean>
__global__ void reduce_and_apply_kernel(Op op, uint8_t uop,
                                        ptr_list<const void*> in, int k,
                                        ptr_list<void*> comps, int m,
                                        bool mirrored, int64_t n) {
  using S = typename K::storage;
  VARSYNC_GRID_LOOP(i, n) {
    S y;
    if (k == 1)
      y = static_cast<const S*>(in.p[0])[i];
    else
      y = K::store(reduce_element<K, Op, Mean>(op, in, k, i));
    if (mirrored) {
      // Equal components: one read (none for assign), the same value stored
      // to all, as host::reduce_and_apply_mirrored.
      S v = uop == op_code::assign
              ? y
              : update_value<K>(uop, static_cast<const S*>(comps.p[0])[i], y);
      for (int c = 0; c < m; ++c)
        static_cast<S*>(comps.p[c])[i] = v;
      continue;
    }
    for (int c = 0; c < m; ++c) {
      S* comp = static_cast<S*>(comps.p[c]);
      comp[i] = update_value<K>(uop, comp[i], y);
    }
  }
}

template <class K>
__global__ void split_kernel(typename K::storage* out,
                             const typename K::storage* in, int rank,
                             int num_replicas, int64_t n) {
  using C = typename K::compute;
  VARSYNC_GRID_LOOP(i, n) {
    if constexpr (std::is_floating_point_v<C>)
      out[i] = K::store(fdiv(K::load(in[i]), static_cast<C>(num_replicas)));
    else
      out[i] = split_int<C>(in[i], static_cast<C>(num_replicas),
                            static_cast<C>(rank));
  }
}

template <class K>
__global__ void divide_kernel(typename K::storage* data, int64_t divisor,
                              int64_t n) {
  using C = typename K::compute;
  VARSYNC_GRID_LOOP(i, n) {
    if constexpr (std::is_floating_point_v<C>)
      data[i] = K::store(fdiv(K::load(data[i]), static_cast<C>(divisor)));
    else
      data[i] = split_int<C>(data[i], static_cast<C>(divisor),
                             static_cast<C>(divisor));
  }
}

template <class K>
__global__ void scale_kernel(typename K::storage* data,
                             typename K::compute factor, int64_t n) {
  VARSYNC_GRID_LOOP(i, n) {
    data[i] = K::store(fmul(K::load(data[i]), factor));
  }
}

/// mask[i] = 1 where data[i] is NaN, else 0 (loaded: 16-bit NaNs are NaNs
/// in float too).
template <class K>
__global__ void nan_mask_kernel(const typename K::storage* data, uint8_t* mask,
                                int64_t n) {
  VARSYNC_GRID_LOOP(i, n) {
    const auto x = K::load(data[i]);
    mask[i] = x != x ? 1 : 0;
  }
}

/// data[i] = a quiet NaN where mask[i] is set.
template <class K>
__global__ void apply_nan_mask_kernel(typename K::storage* data,
                                      const uint8_t* mask, int64_t n) {
  using C = typename K::compute;
  VARSYNC_GRID_LOOP(i, n) {
    if (mask[i] != 0)
      data[i] = K::store(C(NAN));
  }
}

/// out[i] = reduce of the 16-bit inputs in float, unrounded (launch_reduce_widen).
template <class K, class Op>
__global__ void reduce_widen_kernel(Op op, float* out, ptr_list<const void*> in,
                                    int k, int64_t n) {
  VARSYNC_GRID_LOOP(i, n) {
    out[i] = reduce_element<K, Op, false>(op, in, k, i);
  }
}

/// out[i] = round(in[i] / divisor) to K's storage (launch_narrow).
template <class K>
__global__ void narrow_kernel(typename K::storage* out, const float* in,
                              int64_t divisor, int64_t n) {
  VARSYNC_GRID_LOOP(i, n) {
    float x = in[i];
    if (divisor > 1)
      x = fdiv(x, static_cast<float>(divisor));
    out[i] = K::store(x);
  }
}

/// Moves whole rows between a packed buffer and a table: Gather reads table
/// rows into the packed buffer, else the packed rows are written into the
/// table. W is the widest word that divides the row size.
template <class W, bool Gather>
__global__ void rows_kernel(W* table, W* packed, int64_t row_words,
                            const int64_t* rows, int64_t n) {
  VARSYNC_GRID_LOOP(i, n) {
    const int64_t j = i / row_words;
    const int64_t at = rows[j] * row_words + i % row_words;
    if (Gather)
      packed[i] = table[at];
    else
      table[at] = packed[i];
  }
}

template <class T>
__global__ void first_overflow_kernel(uint8_t rop, uint8_t uop,
                                      ptr_list<const void*> in, int k,
                                      const T* component, int64_t n,
                                      unsigned long long* first) {
  const T* inputs[max_kernel_pointers];
  for (int j = 0; j < k; ++j)
    inputs[j] = static_cast<const T*>(in.p[j]);
  VARSYNC_GRID_LOOP(i, n) {
    if (elem::overflows_at<T>(rop, uop, inputs, k, component, i))
      atomicMin(first, static_cast<unsigned long long>(i));
  }
}

/// Bits of one element, compared as an unsigned word of its size.
template <class W>
__global__ void first_unequal_kernel(ptr_list<const void*> in, int k,
                                     int64_t n, unsigned int* first) {
  const W* base = static_cast<const W*>(in.p[0]);
  VARSYNC_GRID_LOOP(i, n) {
    const W x = base[i];
    for (int j = 1; j < k; ++j)
      if (static_cast<const W*>(in.p[j])[i] != x) {
        atomicMin(first, static_cast<unsigned int>(j));
        break;
      }
  }
}

#undef VARSYNC_GRID_LOOP

/// f(op_functor, mean_tag) for the reduce_op code `rop`; integer mean and
/// unknown codes give cudaErrorInvalidValue.
template <class K, class F>
cudaError_t with_reduce_op(reduce_op rop, F&& f) {
  using C = typename K::compute;
  switch (static_cast<uint8_t>(rop)) {
    case op_code::sum: return f(op_sum{}, std::false_type{});
    case op_code::min: return f(op_min{}, std::false_type{});
    case op_code::max: return f(op_max{}, std::false_type{});
    case op_code::prod: return f(op_prod{}, std::false_type{});
    case op_code::mean:
      if constexpr (std::is_floating_point_v<C>)
        return f(op_sum{}, std::true_type{});
      else
        return cudaErrorInvalidValue;
  }
  return cudaErrorInvalidValue;
}

} // namespace

cudaError_t launch_apply_update(update_op op, dtype t, void* dst, const void* y,
                                int64_t n, cudaStream_t stream) {
  if (n <= 0)
    return cudaSuccess;
  const auto code = static_cast<uint8_t>(op);
  if (code == op_code::assign) {
    if (dst == y)
      return cudaSuccess;
    return cudaMemcpyAsync(dst, y, static_cast<size_t>(n) * size_of(t),
                           cudaMemcpyDeviceToDevice, stream);
  }
  if (code != op_code::assign_add && code != op_code::assign_sub)
    return cudaErrorInvalidValue;
  return dispatch(t, [&](auto kind) {
    using K = decltype(kind);
    using S = typename K::storage;
    auto* d = static_cast<S*>(dst);
    auto* s = static_cast<const S*>(y);
    if (code == op_code::assign_add)
      update_kernel<K><<<blocks_for(n), threads, 0, stream>>>(op_sum{}, d, s, n);
    else
      update_kernel<K><<<blocks_for(n), threads, 0, stream>>>(op_diff{}, d, s,
                                                              n);
    return cudaGetLastError();
  });
}

cudaError_t launch_reduce(reduce_op op, dtype t, void* out,
                          const void* const* inputs, int num_inputs, int64_t n,
                          cudaStream_t stream) {
  if (num_inputs < 1 || num_inputs > max_kernel_pointers)
    return cudaErrorInvalidValue;
  ptr_list<const void*> in{};
  for (int j = 0; j < num_inputs; ++j)
    in.p[j] = inputs[j];
  return dispatch(t, [&](auto kind) {
    using K = decltype(kind);
    using S = typename K::storage;
    return with_reduce_op<K>(op, [&](auto fn, auto mean) {
      if (n <= 0)
        return cudaSuccess;
      reduce_kernel<K, decltype(fn), decltype(mean)::value>
        <<<blocks_for(n), threads, 0, stream>>>(fn, static_cast<S*>(out), in,
                                                num_inputs, n);
      return cudaGetLastError();
    });
  });
}

cudaError_t launch_reduce_and_apply(reduce_op rop, update_op uop, dtype t,
                                    const void* const* contributions,
                                    int num_contributions,
                                    void* const* components, int num_components,
                                    bool mirrored, int64_t n,
                                    cudaStream_t stream) {
  if (num_contributions < 1 || num_contributions > max_kernel_pointers
      || num_components < 0 || num_components > max_kernel_pointers)
    return cudaErrorInvalidValue;
  const auto ucode = static_cast<uint8_t>(uop);
  if (ucode > op_code::assign_sub)
    return cudaErrorInvalidValue;
  ptr_list<const void*> in{};
  for (int j = 0; j < num_contributions; ++j)
    in.p[j] = contributions[j];
  ptr_list<void*> comps{};
  for (int j = 0; j < num_components; ++j)
    comps.p[j] = components[j];
  return dispatch(t, [&](auto kind) {
    using K = decltype(kind);
    return with_reduce_op<K>(rop, [&](auto fn, auto mean) {
      if (n <= 0 || num_components == 0)
        return cudaSuccess;
      reduce_and_apply_kernel<K, decltype(fn), decltype(mean)::value>
        <<<blocks_for(n), threads, 0, stream>>>(fn, ucode, in,
                                                num_contributions, comps,
                                                num_components, mirrored, n);
      return cudaGetLastError();
    });
  });
}

cudaError_t launch_split_assign(dtype t, void* dst, const void* x, int64_t n,
                                int rank, int num_replicas,
                                cudaStream_t stream) {
  if (num_replicas < 1 || rank < 0 || rank >= num_replicas)
    return cudaErrorInvalidValue;
  if (n <= 0)
    return cudaSuccess;
  return dispatch(t, [&](auto kind) {
    using K = decltype(kind);
    using S = typename K::storage;
    split_kernel<K><<<blocks_for(n), threads, 0, stream>>>(
      static_cast<S*>(dst), static_cast<const S*>(x), rank, num_replicas, n);
    return cudaGetLastError();
  });
}

namespace {

template <bool Gather>
cudaError_t launch_rows(void* table, void* packed, size_t row_bytes,
                        const int64_t* rows, int64_t num_rows,
                        cudaStream_t stream) {
  if (num_rows <= 0 || row_bytes == 0)
    return cudaSuccess;
  auto go = [&](auto word) {
    using W = decltype(word);
    const auto row_words = static_cast<int64_t>(row_bytes / sizeof(W));
    const int64_t n = row_words * num_rows;
    rows_kernel<W, Gather><<<blocks_for(n), threads, 0, stream>>>(
      static_cast<W*>(table), static_cast<W*>(packed), row_words, rows, n);
    return cudaGetLastError();
  };
  const auto addr = reinterpret_cast<uintptr_t>(table)
                    | reinterpret_cast<uintptr_t>(packed) | row_bytes;
  if (addr % 8 == 0)
    return go(uint64_t{});
  if (addr % 4 == 0)
    return go(uint32_t{});
  if (addr % 2 == 0)
    return go(uint16_t{});
  return go(uint8_t{});
}

} // namespace

cudaError_t launch_gather_rows(void* packed, const void* src, size_t row_bytes,
                               const int64_t* rows, int64_t num_rows,
                               cudaStream_t stream) {
  return launch_rows<true>(const_cast<void*>(src), packed, row_bytes, rows,
                           num_rows, stream);
}

cudaError_t launch_scatter_rows(void* dst, const void* packed, size_t row_bytes,
                                const int64_t* rows, int64_t num_rows,
                                cudaStream_t stream) {
  return launch_rows<false>(dst, const_cast<void*>(packed), row_bytes, rows,
                            num_rows, stream);
}

cudaError_t launch_divide(dtype t, void* data, int64_t divisor, int64_t n,
                          cudaStream_t stream) {
  if (divisor < 1)
    return cudaErrorInvalidValue;
  if (n <= 0)
    return cudaSuccess;
  return dispatch(t, [&](auto kind) {
    using K = decltype(kind);
    using S = typename K::storage;
    divide_kernel<K><<<blocks_for(n), threads, 0, stream>>>(
      static_cast<S*>(data), divisor, n);
    return cudaGetLastError();
  });
}

cudaError_t launch_first_overflow(reduce_op rop, update_op uop, dtype t,
                                  const void* const* inputs, int num_inputs,
                                  const void* component, int64_t n,
                                  unsigned long long* first,
                                  cudaStream_t stream) {
  if (num_inputs < 1 || num_inputs > max_kernel_pointers || first == nullptr
      || static_cast<uint8_t>(uop) > op_code::assign_sub)
    return cudaErrorInvalidValue;
  ptr_list<const void*> in{};
  for (int j = 0; j < num_inputs; ++j)
    in.p[j] = inputs[j];
  const auto r = static_cast<uint8_t>(rop);
  const auto u = static_cast<uint8_t>(uop);
  if (n <= 0)
    return t == dtype::int32 || t == dtype::int64 ? cudaSuccess
                                                  : cudaErrorInvalidValue;
  switch (t) {
    case dtype::int32:
      first_overflow_kernel<int32_t><<<blocks_for(n), threads, 0, stream>>>(
        r, u, in, num_inputs, static_cast<const int32_t*>(component), n,
        first);
      return cudaGetLastError();
    case dtype::int64:
      first_overflow_kernel<int64_t><<<blocks_for(n), threads, 0, stream>>>(
        r, u, in, num_inputs, static_cast<const int64_t*>(component), n,
        first);
      return cudaGetLastError();
    default: return cudaErrorInvalidValue;
  }
}

cudaError_t launch_first_unequal(dtype t, const void* const* inputs,
                                 int num_inputs, int64_t n,
                                 unsigned int* first, cudaStream_t stream) {
  if (num_inputs < 1 || num_inputs > max_kernel_pointers || first == nullptr)
    return cudaErrorInvalidValue;
  if (n <= 0 || num_inputs == 1)
    return cudaSuccess;
  ptr_list<const void*> in{};
  for (int j = 0; j < num_inputs; ++j)
    in.p[j] = inputs[j];
  switch (size_of(t)) {
    case 2:
      first_unequal_kernel<uint16_t>
        <<<blocks_for(n), threads, 0, stream>>>(in, num_inputs, n, first);
      break;
    case 4:
      first_unequal_kernel<uint32_t>
        <<<blocks_for(n), threads, 0, stream>>>(in, num_inputs, n, first);
      break;
    case 8:
      first_unequal_kernel<uint64_t>
        <<<blocks_for(n), threads, 0, stream>>>(in, num_inputs, n, first);
      break;
    default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

namespace {

/// f(kind{}) for float16 / bfloat16; other dtypes are cudaErrorInvalidValue.
template <class F>
cudaError_t dispatch_16bit(dtype t, F&& f) {
  switch (t) {
    case dtype::float16: return f(half_kind{});
    case dtype::bfloat16: return f(bfloat_kind{});
    default: return cudaErrorInvalidValue;
  }
}

} // namespace

cudaError_t launch_reduce_widen(reduce_op op, dtype t, float* out,
                                const void* const* inputs, int num_inputs,
                                int64_t n, cudaStream_t stream) {
  if (num_inputs < 1 || num_inputs > max_kernel_pointers)
    return cudaErrorInvalidValue;
  const auto code = static_cast<uint8_t>(op);
  if (code != op_code::sum && code != op_code::prod)
    return cudaErrorInvalidValue;
  ptr_list<const void*> in{};
  for (int j = 0; j < num_inputs; ++j)
    in.p[j] = inputs[j];
  return dispatch_16bit(t, [&](auto kind) {
    using K = decltype(kind);
    if (n <= 0)
      return cudaSuccess;
    if (code == op_code::sum)
      reduce_widen_kernel<K><<<blocks_for(n), threads, 0, stream>>>(
        op_sum{}, out, in, num_inputs, n);
    else
      reduce_widen_kernel<K><<<blocks_for(n), threads, 0, stream>>>(
        op_prod{}, out, in, num_inputs, n);
    return cudaGetLastError();
  });
}

cudaError_t launch_narrow(dtype t, void* out, const float* in,
                          int64_t divisor, int64_t n, cudaStream_t stream) {
  if (divisor < 1)
    return cudaErrorInvalidValue;
  return dispatch_16bit(t, [&](auto kind) {
    using K = decltype(kind);
    if (n <= 0)
      return cudaSuccess;
    narrow_kernel<K><<<blocks_for(n), threads, 0, stream>>>(
      static_cast<typename K::storage*>(out), in, divisor, n);
    return cudaGetLastError();
  });
}

namespace {

/// f(kind{}) launches a kernel for a floating dtype `t` over n elements;
/// integers are cudaErrorInvalidValue.
template <class F>
cudaError_t launch_floating(dtype t, int64_t n, F&& f) {
  if (!is_floating(t))
    return cudaErrorInvalidValue;
  if (n <= 0)
    return cudaSuccess;
  return dispatch(t, [&](auto kind) {
    using K = decltype(kind);
    if constexpr (std::is_floating_point_v<typename K::compute>) {
      f(kind);
      return cudaGetLastError();
    } else {
      return cudaErrorInvalidValue;
    }
  });
}

} // namespace

cudaError_t launch_nan_mask(dtype t, const void* data, uint8_t* mask,
                            int64_t n, cudaStream_t stream) {
  return launch_floating(t, n, [&](auto kind) {
    using K = decltype(kind);
    nan_mask_kernel<K><<<blocks_for(n), threads, 0, stream>>>(
      static_cast<const typename K::storage*>(data), mask, n);
  });
}

cudaError_t launch_apply_nan_mask(dtype t, void* data, const uint8_t* mask,
                                  int64_t n, cudaStream_t stream) {
  return launch_floating(t, n, [&](auto kind) {
    using K = decltype(kind);
    apply_nan_mask_kernel<K><<<blocks_for(n), threads, 0, stream>>>(
      static_cast<typename K::storage*>(data), mask, n);
  });
}

cudaError_t launch_scale(dtype t, void* data, double factor, int64_t n,
                         cudaStream_t stream) {
  return launch_floating(t, n, [&](auto kind) {
    using K = decltype(kind);
    scale_kernel<K><<<blocks_for(n), threads, 0, stream>>>(
      static_cast<typename K::storage*>(data),
      static_cast<typename K::compute>(factor), n);
  });
}

} // namespace varsync::cuda
