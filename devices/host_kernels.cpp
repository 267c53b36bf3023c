#include "devices/host_kernels.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "devices/element_ops.hpp"
#include "varsync/dtype.hpp"

namespace varsync::host {

namespace {

/// Elements per chunk of the chunked kernels (stack buffers of at most 16 KiB).
constexpr int64_t chunk = 2048;

// -- element kinds and arithmetic: devices/element_ops.hpp, shared with the
//    CUDA kernels ---------------------------------------------------------------

using elem::bfloat_kind;
using elem::half_kind;
using elem::native;
using elem::op_diff;
using elem::op_max;
using elem::op_min;
using elem::op_prod;
using elem::op_sum;
using elem::split_int;
using elem::wrap_add;
using elem::wrap_mul;
using elem::wrap_sub;

/// Calls f(kind{}) for the element kind of `t`: the one dtype dispatch.
template <class F>
decltype(auto) dispatch(dtype t, F&& f) {
  switch (t) {
    case dtype::float16: return f(half_kind{});
    case dtype::bfloat16: return f(bfloat_kind{});
    case dtype::float32: return f(native<float>{});
    case dtype::float64: return f(native<double>{});
    case dtype::int32: return f(native<int32_t>{});
    case dtype::int64: return f(native<int64_t>{});
  }
  throw std::invalid_argument("host kernels: unknown dtype "
                              + std::to_string(static_cast<int>(t)));
}

// -- loops --------------------------------------------------------------------
// Written for GCC's -O2 vectorizer (the "very cheap" cost model), which only
// vectorizes loops whose trip count is a known multiple of the vector width
// and that need no runtime overlap checks. So every loop runs over blocks of
// `block` elements (plus a scalar tail) and takes restrict pointers; where a
// public kernel allows dst == src, the in-place case gets its own loop. The
// loop functions stay out of line so that inlining cannot drop the restrict
// qualifiers (one call per chunk costs nothing).

constexpr int64_t block = 64;

// Vectorize without runtime overlap checks (GCC's -O2 cost model does not
// version loops for them).
#if defined(__clang__)
#define VARSYNC_NO_ALIAS_LOOP _Pragma("clang loop vectorize(assume_safety)")
#elif defined(__GNUC__)
#define VARSYNC_NO_ALIAS_LOOP _Pragma("GCC ivdep")
#else
#define VARSYNC_NO_ALIAS_LOOP
#endif

/// body(i) for i in [0, n), as fixed-size blocks plus a scalar tail.
template <class F>
[[gnu::always_inline]] inline void blocked(int64_t n, F&& body) {
  int64_t i = 0;
  for (; i + block <= n; i += block)
    for (int64_t j = 0; j < block; ++j)
      body(i + j);
  for (; i < n; ++i)
    body(i);
}

/// blocked() for bodies whose pointers are known not to alias.
template <class F>
[[gnu::always_inline]] inline void blocked_no_alias(int64_t n, F&& body) {
  int64_t i = 0;
  for (; i + block <= n; i += block) {
    VARSYNC_NO_ALIAS_LOOP
    for (int64_t j = 0; j < block; ++j)
      body(i + j);
  }
  for (; i < n; ++i)
    body(i);
}

template <class K, class Op>
[[gnu::noinline]] void update_loop(Op op, typename K::storage* __restrict dst,
                                   const typename K::storage* __restrict y,
                                   int64_t n) {
  blocked(n, [=](int64_t i) {
    dst[i] = K::store(op(K::load(dst[i]), K::load(y[i])));
  });
}

template <class K, class Op>
[[gnu::noinline]] void update_loop_in_place(Op op, typename K::storage* dst,
                                            int64_t n) {
  blocked(n, [=](int64_t i) {
    auto v = K::load(dst[i]);
    dst[i] = K::store(op(v, v));
  });
}

template <class K, class Op>
void update_dispatch(Op op, typename K::storage* dst,
                     const typename K::storage* y, int64_t n) {
  if (dst == y)
    update_loop_in_place<K>(op, dst, n);
  else
    update_loop<K>(op, dst, y, n);
}

template <class K>
void update_range(update_op op, typename K::storage* dst,
                  const typename K::storage* y, int64_t n) {
  using S = typename K::storage;
  switch (op) {
    case update_op::assign:
      if (dst != y && n > 0)
        std::memmove(dst, y, static_cast<size_t>(n) * sizeof(S));
      return;
    case update_op::assign_add: update_dispatch<K>(op_sum{}, dst, y, n); return;
    case update_op::assign_sub:
      update_dispatch<K>(op_diff{}, dst, y, n);
      return;
  }
  throw std::invalid_argument("host kernels: unknown update_op "
                              + std::to_string(static_cast<int>(op)));
}

template <class K>
[[gnu::noinline]] void load_loop(typename K::compute* __restrict acc,
                                 const typename K::storage* __restrict in,
                                 int64_t n) {
  blocked(n, [=](int64_t j) { acc[j] = K::load(in[j]); });
}

template <class K>
[[gnu::noinline]] void store_loop(typename K::storage* __restrict out,
                                  const typename K::compute* __restrict acc,
                                  int64_t n) {
  blocked(n, [=](int64_t j) { out[j] = K::store(acc[j]); });
}

template <class K, class Op>
[[gnu::noinline]] void combine_loop(Op op, typename K::compute* __restrict acc,
                                    const typename K::storage* __restrict in,
                                    int64_t n) {
  blocked(n, [=](int64_t j) { acc[j] = op(acc[j], K::load(in[j])); });
}

template <class C>
[[gnu::noinline]] void divide_loop(C* __restrict acc, C divisor, int64_t n) {
  blocked(n, [=](int64_t j) { acc[j] = acc[j] / divisor; });
}

/// acc[j] = op over inputs[k][b + j] for j in [0, n), in compute precision.
/// `acc` is a private buffer, so it never aliases an input.
template <class K, class Op>
void reduce_loop(Op op, typename K::compute* acc,
                 std::span<const void* const> inputs, int64_t b, int64_t n) {
  using S = typename K::storage;
  load_loop<K>(acc, static_cast<const S*>(inputs[0]) + b, n);
  for (size_t k = 1; k < inputs.size(); ++k)
    combine_loop<K>(op, acc, static_cast<const S*>(inputs[k]) + b, n);
}

/// Reduces one chunk [b, b + n) into `acc` for `rop`, mean included.
template <class K>
void reduce_chunk(reduce_op rop, typename K::compute* acc,
                  std::span<const void* const> inputs, int64_t b, int64_t n) {
  using C = typename K::compute;
  switch (rop) {
    case reduce_op::sum: reduce_loop<K>(op_sum{}, acc, inputs, b, n); return;
    case reduce_op::prod: reduce_loop<K>(op_prod{}, acc, inputs, b, n); return;
    case reduce_op::min: reduce_loop<K>(op_min{}, acc, inputs, b, n); return;
    case reduce_op::max: reduce_loop<K>(op_max{}, acc, inputs, b, n); return;
    case reduce_op::mean:
      if constexpr (std::is_floating_point_v<C>) {
        reduce_loop<K>(op_sum{}, acc, inputs, b, n);
        divide_loop(acc, static_cast<C>(inputs.size()), n);
        return;
      }
      break;
  }
  throw std::invalid_argument("host kernels: unsupported reduce_op "
                              + std::to_string(static_cast<int>(rop))
                              + " for this dtype");
}

template <class K>
[[gnu::noinline]] void
split_float_loop(typename K::storage* __restrict out,
                 const typename K::storage* __restrict in,
                 typename K::compute count, int64_t n) {
  blocked(n, [=](int64_t i) { out[i] = K::store(K::load(in[i]) / count); });
}

// split_int (element_ops.hpp): floor division x = q * N + r with 0 <= r < N.
// N >= 1, so x / N never overflows (not even for the minimum value); q - 1
// cannot overflow when r < 0 (then N >= 2 and q >= min / 2), and q + 1
// cannot overflow when k < r (then N >= 2 and q <= max / 2).
template <class T>
[[gnu::noinline]] void split_int_loop(T* __restrict out, const T* __restrict in,
                                      T divisor, T k, int64_t n) {
  blocked(n, [=](int64_t i) { out[i] = split_int(in[i], divisor, k); });
}

template <class T>
[[gnu::noinline]] void split_int_in_place(T* out, T divisor, T k, int64_t n) {
  blocked(n, [=](int64_t i) { out[i] = split_int(out[i], divisor, k); });
}

template <class K>
[[gnu::noinline]] void split_float_in_place(typename K::storage* out,
                                            typename K::compute count,
                                            int64_t n) {
  blocked(n, [=](int64_t i) { out[i] = K::store(K::load(out[i]) / count); });
}

void check_reduce_request(reduce_op op, dtype t, size_t num_inputs,
                          const char* fn) {
  if (num_inputs == 0)
    throw std::invalid_argument(std::string{fn}
                                + ": expected at least one input, found 0");
  if (op == reduce_op::mean && !is_floating(t))
    throw std::invalid_argument(std::string{fn} + ": mean requires a floating "
                                + "dtype, found " + std::string{to_string(t)});
}


// -- mirrored components: one fused pass --------------------------------------
// ON_WRITE components hold equal values, so the new value is computed once,
// from component 0, and stored to every component in the same loop: N + 1
// buffers read and N written in one pass over memory. The chunked kernel
// above streams 2N + ... buffers chunk by chunk, which is measurably slower
// at sizes beyond the caches (docs/results.md). Specialized for a sum of
// 2 to max_fused_replicas contributions of a non-narrow dtype, the gradient
// all-reduce; everything else takes the chunked kernel.

constexpr size_t max_fused_replicas = 8;

/// For i in [0, n): y = ((in_0 + in_1) + ...) (the order of reduce()), then
/// v = uop(c_0, y) and c_r = v for every r. The pointers are distinct
/// buffers (components never alias contributions or each other), hence the
/// no-alias loop pragma.
template <class T, class Uop, size_t... K>
[[gnu::noinline]] void mirrored_sum_loop(Uop uop, std::index_sequence<K...>,
                                         const void* const* inputs,
                                         void* const* components, int64_t b,
                                         int64_t n) {
  const T* const in[] = {static_cast<const T*>(inputs[K]) + b...};
  T* const out[] = {static_cast<T*>(components[K]) + b...};
  blocked_no_alias(n, [&](int64_t i) {
    T y = in[0][i];
    ((y = K == 0 ? y : wrap_add(y, in[K][i])), ...);
    const T v = uop(out[0][i], y);
    ((out[K][i] = v), ...);
  });
}

struct op_assign {
  template <class T>
  T operator()(T, T y) const {
    return y;
  }
};

template <class T, size_t N>
bool mirrored_sum_with(update_op uop, const void* const* inputs,
                       void* const* components, int64_t b, int64_t n) {
  auto seq = std::make_index_sequence<N>{};
  switch (uop) {
    case update_op::assign:
      mirrored_sum_loop<T>(op_assign{}, seq, inputs, components, b, n);
      return true;
    case update_op::assign_add:
      mirrored_sum_loop<T>(op_sum{}, seq, inputs, components, b, n);
      return true;
    case update_op::assign_sub:
      mirrored_sum_loop<T>(op_diff{}, seq, inputs, components, b, n);
      return true;
  }
  return false;
}

/// Runs the fused loop if there is one for this request; false otherwise.
template <class T, size_t... N>
bool mirrored_sum_dispatch(std::index_sequence<N...>, size_t replicas,
                           update_op uop, const void* const* inputs,
                           void* const* components, int64_t b, int64_t n) {
  bool done = false;
  ((done = done
           || (replicas == N + 2
               && mirrored_sum_with<T, N + 2>(uop, inputs, components, b, n))),
   ...);
  return done;
}

} // namespace

void apply_update(update_op op, dtype t, void* dst, const void* y,
                  int64_t begin, int64_t end) {
  if (end <= begin)
    return;
  dispatch(t, [&](auto kind) {
    using K = decltype(kind);
    using S = typename K::storage;
    update_range<K>(op, static_cast<S*>(dst) + begin,
                    static_cast<const S*>(y) + begin, end - begin);
  });
}

void reduce(reduce_op op, dtype t, void* out,
            std::span<const void* const> inputs, int64_t begin, int64_t end) {
  check_reduce_request(op, t, inputs.size(), "host::reduce");
  if (end <= begin)
    return;
  dispatch(t, [&](auto kind) {
    using K = decltype(kind);
    using S = typename K::storage;
    using C = typename K::compute;
    S* dst = static_cast<S*>(out);
    // Each chunk reads all inputs before it writes `out`, so `out` may be one
    // of the inputs.
    C acc[chunk];
    for (int64_t b = begin; b < end; b += chunk) {
      const int64_t n = std::min(chunk, end - b);
      reduce_chunk<K>(op, acc, inputs, b, n);
      store_loop<K>(dst + b, acc, n);
    }
  });
}

void reduce_and_apply(reduce_op rop, update_op uop, dtype t,
                      std::span<const void* const> contributions,
                      std::span<void* const> components, int64_t begin,
                      int64_t end) {
  check_reduce_request(rop, t, contributions.size(), "host::reduce_and_apply");
  if (end <= begin || components.empty())
    return;
  dispatch(t, [&](auto kind) {
    using K = decltype(kind);
    using S = typename K::storage;
    using C = typename K::compute;
    if (contributions.size() == 1) {
      // y is the single contribution itself: stream it into every component.
      const S* y = static_cast<const S*>(contributions[0]);
      for (void* c : components)
        update_range<K>(uop, static_cast<S*>(c) + begin, y + begin,
                        end - begin);
      return;
    }
    C acc[chunk];
    S ybuf_storage[K::narrow ? chunk : 1];
    for (int64_t b = begin; b < end; b += chunk) {
      const int64_t n = std::min(chunk, end - b);
      reduce_chunk<K>(rop, acc, contributions, b, n);
      // y is rounded to the dtype before it meets the components, exactly as
      // a reduce() followed by apply_update() would do.
      const S* y;
      if constexpr (K::narrow) {
        store_loop<K>(ybuf_storage, acc, n);
        y = ybuf_storage;
      } else {
        y = acc;
      }
      for (void* c : components)
        update_range<K>(uop, static_cast<S*>(c) + b, y, n);
    }
  });
}

void reduce_and_apply_mirrored(reduce_op rop, update_op uop, dtype t,
                               std::span<const void* const> contributions,
                               std::span<void* const> components,
                               int64_t begin, int64_t end) {
  check_reduce_request(rop, t, contributions.size(),
                       "host::reduce_and_apply_mirrored");
  if (end <= begin || components.empty())
    return;
  const auto n = contributions.size();
  if (rop == reduce_op::sum && n == components.size() && n >= 2
      && n <= max_fused_replicas) {
    auto fused = dispatch(t, [&](auto kind) {
      using K = decltype(kind);
      if constexpr (K::narrow) {
        return false;
      } else {
        return mirrored_sum_dispatch<typename K::storage>(
          std::make_index_sequence<max_fused_replicas - 1>{}, n, uop,
          contributions.data(), components.data(), begin, end - begin);
      }
    });
    if (fused)
      return;
  }
  reduce_and_apply(rop, uop, t, contributions, components, begin, end);
}

void split_assign(dtype t, void* dst, const void* x, int64_t begin, int64_t end,
                  int rank, int num_replicas) {
  if (num_replicas < 1 || rank < 0 || rank >= num_replicas)
    throw std::invalid_argument("host::split_assign: expected 0 <= rank < "
                                "num_replicas, found rank "
                                + std::to_string(rank) + " of "
                                + std::to_string(num_replicas));
  if (end <= begin)
    return;
  dispatch(t, [&](auto kind) {
    using K = decltype(kind);
    using S = typename K::storage;
    using C = typename K::compute;
    S* out = static_cast<S*>(dst) + begin;
    const S* in = static_cast<const S*>(x) + begin;
    const int64_t n = end - begin;
    if constexpr (std::is_floating_point_v<C>) {
      const C count = static_cast<C>(num_replicas);
      if (out == in)
        split_float_in_place<K>(out, count, n);
      else
        split_float_loop<K>(out, in, count, n);
    } else {
      const C divisor = static_cast<C>(num_replicas);
      const C k = static_cast<C>(rank);
      if (out == in)
        split_int_in_place(out, divisor, k, n);
      else
        split_int_loop(out, in, divisor, k, n);
    }
  });
}

// -- integer overflow ----------------------------------------------------------
// -- row scatters ---------------------------------------------------------------

namespace {

struct op_second {
  template <class T>
  T operator()(T, T b) const {
    return b;
  }
};

// Truncating integer division; zero divisors and min / -1 are refused by
// the callers first (scatter_first_overflow, first_zero).
struct op_div {
  template <class T>
  T operator()(T a, T b) const {
    return a / b;
  }
};

template <class K, class Op>
void scatter_rows(Op op, typename K::storage* dst, int64_t row_elems,
                  const int64_t* rows, const typename K::storage* y,
                  int64_t begin, int64_t end) {
  using S = typename K::storage;
  const int64_t num_rows = (end + row_elems - 1) / row_elems;
  constexpr int64_t ahead = 8; // rows: random rows miss every cache level
  for (int64_t e = begin; e < end;) {
    const int64_t j = e / row_elems;
    const int64_t o = e - j * row_elems;
    const int64_t n = std::min(row_elems - o, end - e);
    if (j + ahead < num_rows) {
      const char* next = reinterpret_cast<const char*>(
        dst + rows[j + ahead] * row_elems);
      const auto bytes = static_cast<int64_t>(row_elems * sizeof(S));
      for (int64_t b = 0; b < bytes && b < 1024; b += 64)
        __builtin_prefetch(next + b, 1);
    }
    // A row of the component never overlaps the packed rows of y.
    update_loop<K>(op, dst + rows[j] * row_elems + o, y + e, n);
    e += n;
  }
}

template <class T>
bool scatter_overflows(scatter_op op, T c, T y) {
  T out{};
  switch (op) {
    case scatter_op::add: return __builtin_add_overflow(c, y, &out);
    case scatter_op::sub: return __builtin_sub_overflow(c, y, &out);
    case scatter_op::mul: return __builtin_mul_overflow(c, y, &out);
    case scatter_op::div:
      return y == T{-1} && c == std::numeric_limits<T>::min();
    default: return false;
  }
}

/// op(c, y) where scatter_overflows(op, c, y) is false and y is no zero
/// divisor: exact.
template <class T>
T scatter_exact(scatter_op op, T c, T y) {
  switch (op) {
    case scatter_op::update: return y;
    case scatter_op::add: return static_cast<T>(c + y);
    case scatter_op::sub: return static_cast<T>(c - y);
    case scatter_op::mul: return static_cast<T>(c * y);
    case scatter_op::div: return static_cast<T>(c / y);
    case scatter_op::min: return y < c ? y : c;
    case scatter_op::max: return c < y ? y : c;
  }
  return c;
}

template <class T>
int64_t scatter_first_overflow_of(scatter_op op, const T* dst,
                                  int64_t row_elems, const int64_t* rows,
                                  const T* y, int64_t begin, int64_t end) {
  for (int64_t e = begin; e < end; ++e) {
    const int64_t j = e / row_elems;
    // A repeat of the row before: checked with that row's first occurrence.
    if (e - row_elems >= begin && rows[j - 1] == rows[j])
      continue;
    T c = dst[rows[j] * row_elems + (e - j * row_elems)];
    for (int64_t at = e;;) {
      if (scatter_overflows(op, c, y[at])
          || (op == scatter_op::div && y[at] == 0))
        return at;
      const int64_t next = at + row_elems;
      const int64_t k = next / row_elems;
      if (next >= end || rows[k] != rows[k - 1])
        break;
      c = scatter_exact(op, c, y[at]);
      at = next;
    }
  }
  return -1;
}

} // namespace

void scatter_apply(scatter_op op, dtype t, void* dst, int64_t row_elems,
                   std::span<const int64_t> rows, const void* y, int64_t begin,
                   int64_t end) {
  if (end <= begin)
    return;
  if (row_elems <= 0
      || end > static_cast<int64_t>(rows.size()) * row_elems)
    throw std::invalid_argument("scatter_apply: range beyond the rows");
  dispatch(t, [&](auto kind) {
    using K = decltype(kind);
    using S = typename K::storage;
    auto* d = static_cast<S*>(dst);
    auto* v = static_cast<const S*>(y);
    auto run = [&](auto f) {
      scatter_rows<K>(f, d, row_elems, rows.data(), v, begin, end);
    };
    switch (op) {
      case scatter_op::update: return run(op_second{});
      case scatter_op::add: return run(op_sum{});
      case scatter_op::sub: return run(op_diff{});
      case scatter_op::mul: return run(op_prod{});
      case scatter_op::div: return run(op_div{});
      case scatter_op::min: return run(op_min{});
      case scatter_op::max: return run(op_max{});
    }
    throw std::invalid_argument("host kernels: unknown scatter_op "
                                + std::to_string(static_cast<int>(op)));
  });
}

int64_t scatter_first_overflow(scatter_op op, dtype t, const void* dst,
                               int64_t row_elems,
                               std::span<const int64_t> rows, const void* y,
                               int64_t begin, int64_t end) {
  switch (t) {
    case dtype::int32:
      return scatter_first_overflow_of(op, static_cast<const int32_t*>(dst),
                                       row_elems, rows.data(),
                                       static_cast<const int32_t*>(y), begin,
                                       end);
    case dtype::int64:
      return scatter_first_overflow_of(op, static_cast<const int64_t*>(dst),
                                       row_elems, rows.data(),
                                       static_cast<const int64_t*>(y), begin,
                                       end);
    default: return -1;
  }
}

bool rows_repeat(std::span<const int64_t> rows) {
  return std::adjacent_find(rows.begin(), rows.end()) != rows.end();
}

int64_t first_zero(dtype t, const void* x, int64_t begin, int64_t end) {
  auto find = [&](auto* p) -> int64_t {
    for (int64_t i = begin; i < end; ++i)
      if (p[i] == 0)
        return i;
    return -1;
  };
  switch (t) {
    case dtype::int32: return find(static_cast<const int32_t*>(x));
    case dtype::int64: return find(static_cast<const int64_t*>(x));
    default: return -1;
  }
}

// Integer results that do not fit the dtype fail instead of wrapping (V4). A
// read-only pass finds them before anything is written; floating dtypes never
// get here.

namespace {

template <class T>
int64_t first_overflow_of(reduce_op rop, update_op uop,
                          std::span<const void* const> inputs,
                          const void* component, int64_t begin, int64_t end) {
  constexpr size_t stack = 64;
  const T* on_stack[stack];
  std::vector<const T*> on_heap;
  const T** in = on_stack;
  if (inputs.size() > stack) {
    on_heap.resize(inputs.size());
    in = on_heap.data();
  }
  for (size_t k = 0; k < inputs.size(); ++k)
    in[k] = static_cast<const T*>(inputs[k]);
  const T* c = static_cast<const T*>(component);
  const auto r = static_cast<uint8_t>(rop);
  const auto u = static_cast<uint8_t>(uop);
  const int n = static_cast<int>(inputs.size());
  for (int64_t i = begin; i < end; ++i)
    if (elem::overflows_at<T>(r, u, in, n, c, i))
      return i;
  return -1;
}

} // namespace

int64_t first_overflow(reduce_op rop, update_op uop, dtype t,
                       std::span<const void* const> inputs,
                       const void* component, int64_t begin, int64_t end) {
  if (inputs.empty() || end <= begin)
    return -1;
  switch (t) {
    case dtype::int32:
      return first_overflow_of<int32_t>(rop, uop, inputs, component, begin,
                                        end);
    case dtype::int64:
      return first_overflow_of<int64_t>(rop, uop, inputs, component, begin,
                                        end);
    default: return -1;
  }
}

int64_t reduce_int32_widened(reduce_op rop, int64_t* out,
                             std::span<const int32_t* const> inputs,
                             int64_t begin, int64_t end) {
  if (inputs.empty())
    throw std::invalid_argument("reduce_int32_widened: no inputs");
  int64_t first_bad = -1;
  for (int64_t i = begin; i < end; ++i) {
    int64_t y = inputs[0][i];
    bool bad = false;
    for (size_t k = 1; k < inputs.size(); ++k)
      bad |= elem::combine_overflows(static_cast<uint8_t>(rop), y,
                                     inputs[k][i], y);
    if (bad && first_bad < 0)
      first_bad = i;
    out[i] = y;
  }
  return first_bad;
}

int64_t narrow_to_int32(int32_t* out, const int64_t* x, int64_t begin,
                        int64_t end) {
  constexpr int64_t lo = std::numeric_limits<int32_t>::min();
  constexpr int64_t hi = std::numeric_limits<int32_t>::max();
  for (int64_t i = begin; i < end; ++i)
    if (x[i] < lo || x[i] > hi)
      return i;
  for (int64_t i = begin; i < end; ++i)
    out[i] = static_cast<int32_t>(x[i]);
  return -1;
}

bool bitwise_equal(const void* a, const void* b, size_t nbytes) {
  return nbytes == 0 || a == b || std::memcmp(a, b, nbytes) == 0;
}

} // namespace varsync::host
