#pragma once
// The arithmetic of one element, written once for the host kernels
// (devices/host_kernels.cpp) and the CUDA kernels
// (devices/cuda/cuda_kernels.cu), so that host and GPU cannot drift: the
// element kinds (storage type, compute type, the 16-bit conversions, round
// to nearest even), integer arithmetic that wraps instead of overflowing,
// min/max that propagate NaN, and the R4 floor-division split.
//
// Compiled by the host compiler as plain inline functions and by nvcc as
// __host__ __device__ ones. On the device, floating operations use the _rn
// intrinsics, which are never contracted into a multiply-add whatever the
// compiler flags. No CAF, no CUDA header: nvcc sees this file.

#include <cstdint>
#include <cstring>
#include <type_traits>

#if defined(__CUDACC__)
#define VARSYNC_HD __host__ __device__ __forceinline__
#else
#define VARSYNC_HD inline
#endif

namespace varsync::elem {

VARSYNC_HD float bits_to_float(uint32_t b) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(b);
#else
  float f;
  std::memcpy(&f, &b, 4);
  return f;
#endif
}

VARSYNC_HD uint32_t float_to_bits(float f) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(f);
#else
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
#endif
}

// -- floating operations, rounded to nearest ----------------------------------

VARSYNC_HD float fadd(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
VARSYNC_HD double fadd(double a, double b) {
#ifdef __CUDA_ARCH__
  return __dadd_rn(a, b);
#else
  return a + b;
#endif
}
VARSYNC_HD float fsub(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}
VARSYNC_HD double fsub(double a, double b) {
#ifdef __CUDA_ARCH__
  return __dsub_rn(a, b);
#else
  return a - b;
#endif
}
VARSYNC_HD float fmul(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
VARSYNC_HD double fmul(double a, double b) {
#ifdef __CUDA_ARCH__
  return __dmul_rn(a, b);
#else
  return a * b;
#endif
}
VARSYNC_HD float fdiv(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}
VARSYNC_HD double fdiv(double a, double b) {
#ifdef __CUDA_ARCH__
  return __ddiv_rn(a, b);
#else
  return a / b;
#endif
}

// -- the 16-bit formats --------------------------------------------------------
// Bit for bit the results of core/half.hpp (checked exhaustively over
// every input by the host tests), written with selects instead of branches
// so that the host loops vectorize.

/// c ? a : b, written with masks. A plain ?: lets GCC sink the computation of
/// `a` into a branch; when `a` comes from a float operation (which may trap),
/// that branch then keeps the loop from being if-converted and vectorized.
VARSYNC_HD uint32_t select_bits(bool c, uint32_t a, uint32_t b) {
  const uint32_t mask = 0u - static_cast<uint32_t>(c);
  return (a & mask) | (b & ~mask);
}

/// float16 bits -> float.
VARSYNC_HD float half_to_float(uint16_t h) {
  const uint32_t em = static_cast<uint32_t>(h & 0x7fffu) << 13;
  const uint32_t exp = em & 0x0f800000u;
  const uint32_t o = em + ((127u - 15u) << 23);
  // Normal values just rebias the exponent; inf and NaN get exponent 255.
  const uint32_t normal = exp == 0x0f800000u ? o + ((128u - 16u) << 23) : o;
  // Zero and subnormals: renormalize through a float subtraction (exact).
  const float sub
    = fsub(bits_to_float(o + (1u << 23)), bits_to_float(113u << 23));
  const uint32_t bits = select_bits(exp == 0, float_to_bits(sub), normal);
  return bits_to_float(bits | (static_cast<uint32_t>(h & 0x8000u) << 16));
}

/// float -> float16 bits, round to nearest even.
VARSYNC_HD uint16_t float_to_half(float x) {
  uint32_t f = float_to_bits(x);
  const uint32_t sign = f & 0x80000000u;
  f ^= sign;
  // f < 2^31 now, so the comparisons can be signed (cheaper in SIMD).
  const auto fs = static_cast<int32_t>(f);
  // Overflow gives infinity, NaN a quiet NaN.
  const uint32_t special = fs > int32_t{255 << 23} ? 0x7e00u : 0x7c00u;
  // Results below the normal range: let the FPU round (to nearest even).
  const float magic = bits_to_float(((127u - 15u) + (23u - 10u) + 1u) << 23);
  const uint32_t sub
    = float_to_bits(fadd(bits_to_float(f), magic)) - float_to_bits(magic);
  // Normal results: rebias and round the mantissa to nearest even.
  const uint32_t odd = (f >> 13) & 1u;
  const uint32_t norm = (f + ((15u - 127u) << 23) + 0xfffu + odd) >> 13;
  const uint32_t finite = select_bits(fs < int32_t{113 << 23}, sub, norm);
  const uint32_t o
    = select_bits(fs >= int32_t{(127 + 16) << 23}, special, finite);
  return static_cast<uint16_t>(o | (sign >> 16));
}

/// bfloat16 bits -> float.
VARSYNC_HD float bfloat_to_float(uint16_t h) {
  return bits_to_float(static_cast<uint32_t>(h) << 16);
}

/// float -> bfloat16 bits, round to nearest even; NaN stays a quiet NaN.
VARSYNC_HD uint16_t float_to_bfloat(float x) {
  const uint32_t b = float_to_bits(x);
  const uint32_t rounded = (b + 0x7fffu + ((b >> 16) & 1u)) >> 16;
  const uint32_t quiet_nan = (b >> 16) | 0x40u;
  const auto magnitude = static_cast<int32_t>(b & 0x7fffffffu);
  return static_cast<uint16_t>(magnitude > int32_t{0x7f800000} ? quiet_nan
                                                               : rounded);
}

// -- element kinds: storage type, compute type, conversions -------------------

template <class T>
struct native {
  using storage = T;
  using compute = T;
  static constexpr bool narrow = false;
  static VARSYNC_HD T load(T x) { return x; }
  static VARSYNC_HD T store(T x) { return x; }
};

struct half_kind {
  using storage = uint16_t;
  using compute = float;
  static constexpr bool narrow = true;
  static VARSYNC_HD float load(uint16_t h) { return half_to_float(h); }
  static VARSYNC_HD uint16_t store(float f) { return float_to_half(f); }
};

struct bfloat_kind {
  using storage = uint16_t;
  using compute = float;
  static constexpr bool narrow = true;
  static VARSYNC_HD float load(uint16_t h) { return bfloat_to_float(h); }
  static VARSYNC_HD uint16_t store(float f) { return float_to_bfloat(f); }
};

// -- arithmetic without undefined behavior ------------------------------------

template <class T>
VARSYNC_HD T wrap_add(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
  } else {
    return fadd(a, b);
  }
}

template <class T>
VARSYNC_HD T wrap_sub(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) - static_cast<U>(b));
  } else {
    return fsub(a, b);
  }
}

template <class T>
VARSYNC_HD T wrap_mul(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    // Promote so that e.g. uint16 * uint16 cannot overflow a signed int.
    using W = std::conditional_t<(sizeof(U) < sizeof(unsigned)), unsigned, U>;
    return static_cast<T>(static_cast<W>(static_cast<U>(a))
                          * static_cast<W>(static_cast<U>(b)));
  } else {
    return fmul(a, b);
  }
}

struct op_sum {
  template <class T>
  VARSYNC_HD T operator()(T a, T b) const {
    return wrap_add(a, b);
  }
};

struct op_diff {
  template <class T>
  VARSYNC_HD T operator()(T a, T b) const {
    return wrap_sub(a, b);
  }
};

struct op_prod {
  template <class T>
  VARSYNC_HD T operator()(T a, T b) const {
    return wrap_mul(a, b);
  }
};

// min/max: NaN in either operand propagates (b != b is only true for NaN).
struct op_min {
  template <class T>
  VARSYNC_HD T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>)
      return (b < a || b != b) ? b : a;
    else
      return b < a ? b : a;
  }
};

struct op_max {
  template <class T>
  VARSYNC_HD T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>)
      return (a < b || b != b) ? b : a;
    else
      return a < b ? b : a;
  }
};

// -- V4: integer arithmetic that reports overflow ----------------------------

/// a + b, a - b and a * b in int64: true when the exact result does not fit
/// (`out` then holds the wrapped value). nvcc's device code has no
/// __builtin_*_overflow.
VARSYNC_HD bool add_overflows(int64_t a, int64_t b, int64_t& out) {
  out = static_cast<int64_t>(static_cast<uint64_t>(a)
                             + static_cast<uint64_t>(b));
  return ((a ^ out) & (b ^ out)) < 0;
}

VARSYNC_HD bool sub_overflows(int64_t a, int64_t b, int64_t& out) {
  out = static_cast<int64_t>(static_cast<uint64_t>(a)
                             - static_cast<uint64_t>(b));
  return ((a ^ b) & (a ^ out)) < 0;
}

VARSYNC_HD bool mul_overflows(int64_t a, int64_t b, int64_t& out) {
  out = static_cast<int64_t>(static_cast<uint64_t>(a)
                             * static_cast<uint64_t>(b));
#ifdef __CUDA_ARCH__
  // The high half of the 128-bit product is the low half's sign extension
  // exactly when the product fits.
  return __mul64hi(a, b) != (out < 0 ? -1 : 0);
#else
  return __builtin_mul_overflow(a, b, &out);
#endif
}

/// The combination of two int64 partial results by a reduction (the codes
/// of reduce_op: sum 0, mean 1, min 2, max 3, prod 4); true on overflow.
/// A mean combines as a sum (the division comes after).
VARSYNC_HD bool combine_overflows(uint8_t rop, int64_t a, int64_t b,
                                  int64_t& out) {
  switch (rop) {
    case 0:
    case 1: return add_overflows(a, b, out);
    case 2: out = b < a ? b : a; return false;
    case 3: out = a < b ? b : a; return false;
    case 4: return mul_overflows(a, b, out);
    default: out = a; return false;
  }
}

/// V4 at element i: y = the reduction of inputs[0..n)[i] (exact in int64),
/// then, for `uop` assign_add (1) or assign_sub (2) with a component c,
/// c[i] +/- y; true if an intermediate does not fit int64 or the result
/// does not fit T. An int32 result is checked once, at the end (partial
/// sums outside int32 that come back in range are fine: the wrapping
/// kernels then store the exact value).
template <class T>
VARSYNC_HD bool overflows_at(uint8_t rop, uint8_t uop, const T* const* inputs,
                             int n, const T* c, int64_t i) {
  int64_t y = inputs[0][i];
  bool bad = false;
  for (int k = 1; k < n; ++k)
    bad |= combine_overflows(rop, y, static_cast<int64_t>(inputs[k][i]), y);
  if (c != nullptr && (uop == 1 || uop == 2)) {
    int64_t v = 0;
    bad |= uop == 1 ? add_overflows(static_cast<int64_t>(c[i]), y, v)
                    : sub_overflows(static_cast<int64_t>(c[i]), y, v);
    y = v;
  }
  static_assert(sizeof(T) == 4 || sizeof(T) == 8, "int32 or int64");
  if constexpr (sizeof(T) == 4)
    return bad || y < INT32_MIN || y > INT32_MAX;
  else
    return bad;
}

/// R4's integer split: replica k's share of v over `divisor` replicas, with
/// floor division, so that the shares add up to v (N >= 2 and q <= max / 2).
template <class T>
VARSYNC_HD T split_int(T v, T divisor, T k) {
  T q = v / divisor;
  T r = v % divisor;
  const bool negative = r < 0;
  q -= negative ? 1 : 0;
  r += negative ? divisor : 0;
  return q + (k < r ? 1 : 0);
}

} // namespace varsync::elem
