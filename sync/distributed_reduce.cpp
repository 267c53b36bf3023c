#include "sync/distributed_reduce.hpp"

#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "core/half.hpp"
#include "varsync/error.hpp"
#include "varsync/dtype.hpp"
#include "devices/host_kernels.hpp"

namespace varsync {

namespace {

// -- validation ---------------------------------------------------------------

std::string replica_name(size_t k) {
  return "replica " + std::to_string(k);
}

caf::error no_values(const char* fn) {
  return make_error(errc::invalid_argument,
                    std::string{fn}
                      + ": expected at least one replica value, found none");
}

caf::error check_dtypes(const char* fn, std::span<const tensor> values) {
  const auto expected = values[0].type();
  for (size_t k = 1; k < values.size(); ++k) {
    if (values[k].type() != expected)
      return make_error(errc::dtype_mismatch,
                        std::string{fn} + ": " + replica_name(k)
                          + " has dtype " + std::string{to_string(
                            values[k].type())}
                          + " but replica 0 has dtype "
                          + std::string{to_string(expected)});
  }
  return {};
}

caf::error check_same_shapes(const char* fn, std::span<const tensor> values) {
  const auto& expected = values[0].shape();
  for (size_t k = 1; k < values.size(); ++k) {
    if (values[k].shape() != expected)
      return make_error(errc::shape_mismatch,
                        std::string{fn} + ": " + replica_name(k)
                          + " has shape " + to_string(values[k].shape())
                          + " but replica 0 has shape " + to_string(expected));
  }
  return {};
}

caf::error check_same_ranks(const char* fn, std::span<const tensor> values) {
  const auto& expected = values[0].shape();
  for (size_t k = 1; k < values.size(); ++k) {
    if (values[k].rank() != values[0].rank())
      return make_error(errc::shape_mismatch,
                        std::string{fn} + ": " + replica_name(k)
                          + " has shape " + to_string(values[k].shape())
                          + " of rank " + std::to_string(values[k].rank())
                          + " but replica 0 has shape " + to_string(expected)
                          + " of rank " + std::to_string(values[0].rank()));
  }
  return {};
}

/// Maps a python-style axis into [0, rank) or fails with invalid_argument.
caf::expected<int64_t> normalize_axis(const char* fn, int64_t axis,
                                      int64_t rank) {
  if (rank == 0)
    return make_error(errc::invalid_argument,
                      std::string{fn} + ": axis " + std::to_string(axis)
                        + " is out of range for values of rank 0 (expected "
                          "values of rank >= 1)");
  const int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank)
    return make_error(errc::invalid_argument,
                      std::string{fn} + ": axis " + std::to_string(axis)
                        + " is out of range for values of rank "
                        + std::to_string(rank) + " (expected "
                        + std::to_string(-rank)
                        + " <= axis < " + std::to_string(rank) + ")");
  return a;
}

/// Shapes must agree on every dimension except `a` (ranks already agree).
caf::error check_shapes_except(const char* fn, std::span<const tensor> values,
                               int64_t a) {
  const auto& expected = values[0].shape();
  for (size_t k = 1; k < values.size(); ++k) {
    const auto& found = values[k].shape();
    for (size_t d = 0; d < found.size(); ++d) {
      if (static_cast<int64_t>(d) != a && found[d] != expected[d])
        return make_error(errc::shape_mismatch,
                          std::string{fn} + ": " + replica_name(k)
                            + " has shape " + to_string(found)
                            + " but replica 0 has shape " + to_string(expected)
                            + "; shapes must agree on every dimension except "
                              "axis "
                            + std::to_string(a));
    }
  }
  return {};
}

/// Validates values for an axis operation and returns the normalized axis.
caf::expected<int64_t> check_axis_request(const char* fn,
                                          std::span<const tensor> values,
                                          int64_t axis) {
  if (values.empty())
    return no_values(fn);
  if (auto err = check_dtypes(fn, values))
    return err;
  if (auto err = check_same_ranks(fn, values))
    return err;
  auto a = normalize_axis(fn, axis, values[0].rank());
  if (!a)
    return a.error();
  if (auto err = check_shapes_except(fn, values, *a))
    return err;
  return *a;
}

int64_t product(const tensor_shape& s, size_t from, size_t to) {
  int64_t n = 1;
  for (size_t d = from; d < to; ++d)
    n *= s[d];
  return n;
}

// -- element access -----------------------------------------------------------

/// Calls f(storage{}, to_double) for dtype `t`.
template <class F>
decltype(auto) with_storage(dtype t, F&& f) {
  switch (t) {
    case dtype::float16:
      return f(uint16_t{}, [](uint16_t h) {
        return static_cast<double>(float16_to_float(h));
      });
    case dtype::bfloat16:
      return f(uint16_t{}, [](uint16_t h) {
        return static_cast<double>(bfloat16_to_float(h));
      });
    case dtype::float32:
      return f(float{}, [](float x) { return static_cast<double>(x); });
    case dtype::float64: return f(double{}, [](double x) { return x; });
    case dtype::int32:
      return f(int32_t{}, [](int32_t x) { return static_cast<double>(x); });
    case dtype::int64:
      return f(int64_t{}, [](int64_t x) { return static_cast<double>(x); });
  }
  return f(double{}, [](double x) { return x; });
}

// Accumulator operations; unsigned integers wrap, floating min/max propagate
// NaN (like the host kernels).
struct acc_sum {
  template <class A>
  A operator()(A a, A b) const {
    return a + b;
  }
};
struct acc_prod {
  template <class A>
  A operator()(A a, A b) const {
    return a * b;
  }
};
struct acc_min {
  template <class A>
  A operator()(A a, A b) const {
    if constexpr (std::is_floating_point_v<A>)
      return (b < a || b != b) ? b : a;
    else
      return b < a ? b : a;
  }
};
struct acc_max {
  template <class A>
  A operator()(A a, A b) const {
    if constexpr (std::is_floating_point_v<A>)
      return (a < b || b != b) ? b : a;
    else
      return a < b ? b : a;
  }
};

/// Folds every element along axis `a` of every replica into acc[outer*inner]
/// with `op`, in replica order. The first element along the axis initializes
/// the accumulator. Returns false if the total count along the axis is 0.
template <class S, class A, class Conv, class Op>
bool accumulate_axis(std::span<const tensor> values, int64_t a, int64_t outer,
                     int64_t inner, Conv conv, Op op, A* acc) {
  bool initialized = false;
  for (const auto& v : values) {
    const int64_t len = v.shape()[static_cast<size_t>(a)];
    if (len == 0)
      continue;
    const S* p = v.data<S>();
    for (int64_t o = 0; o < outer; ++o) {
      A* dst = acc + o * inner;
      const S* src = p + o * len * inner;
      int64_t j = 0;
      if (!initialized) {
        for (int64_t i = 0; i < inner; ++i)
          dst[i] = conv(src[i]);
        j = 1;
      }
      for (; j < len; ++j) {
        const S* row = src + j * inner;
        for (int64_t i = 0; i < inner; ++i)
          dst[i] = op(dst[i], conv(row[i]));
      }
    }
    initialized = true;
  }
  return initialized;
}

/// Runs accumulate_axis with the op named by `rop` (mean folds as sum).
template <class S, class A, class Conv>
bool accumulate_axis(reduce_op rop, std::span<const tensor> values, int64_t a,
                     int64_t outer, int64_t inner, Conv conv, A* acc) {
  switch (rop) {
    case reduce_op::sum:
    case reduce_op::mean:
      return accumulate_axis<S>(values, a, outer, inner, conv, acc_sum{}, acc);
    case reduce_op::prod:
      return accumulate_axis<S>(values, a, outer, inner, conv, acc_prod{},
                                acc);
    case reduce_op::min:
      return accumulate_axis<S>(values, a, outer, inner, conv, acc_min{}, acc);
    case reduce_op::max:
      return accumulate_axis<S>(values, a, outer, inner, conv, acc_max{}, acc);
  }
  return false;
}

caf::error overflow_error(const char* fn, reduce_op op, dtype type,
                          int64_t element) {
  return make_error(errc::overflow,
                    std::string{fn} + ": the " + std::string{to_string(op)}
                      + " of the " + std::string{to_string(type)}
                      + " values at element " + std::to_string(element)
                      + " does not fit " + std::string{to_string(type)});
}

caf::error unknown_op(const char* fn, reduce_op op) {
  // Appended, not a chain of +: GCC 12 warns (-Warray-bounds) about the
  // moved temporaries of the chain.
  std::string what{fn};
  what.append(": unknown reduce_op ")
    .append(std::to_string(static_cast<int>(op)));
  return make_error(errc::invalid_argument, what);
}

bool known_op(reduce_op op) {
  switch (op) {
    case reduce_op::sum:
    case reduce_op::mean:
    case reduce_op::min:
    case reduce_op::max:
    case reduce_op::prod: return true;
  }
  return false;
}

} // namespace

caf::expected<tensor> reduce_values(reduce_op op,
                                    std::span<const tensor> values) {
  constexpr const char* fn = "reduce";
  if (!known_op(op))
    return unknown_op(fn, op);
  if (values.empty())
    return no_values(fn);
  if (auto err = check_dtypes(fn, values))
    return err;
  if (auto err = check_same_shapes(fn, values))
    return err;
  const auto type = values[0].type();
  const auto& shape = values[0].shape();
  const int64_t n = values[0].size();
  if (op == reduce_op::mean && !is_floating(type)) {
    // D6: the mean of integers is float64, summed in double in replica order.
    auto out = tensor::zeros(dtype::float64, shape);
    double* dst = out.mutable_data<double>();
    for (const auto& v : values) {
      with_storage(type, [&](auto s, auto conv) {
        using S = decltype(s);
        const S* src = v.data<S>();
        for (int64_t i = 0; i < n; ++i)
          dst[i] += conv(src[i]);
      });
    }
    const double count = static_cast<double>(values.size());
    for (int64_t i = 0; i < n; ++i)
      dst[i] /= count;
    return out;
  }
  auto out = tensor::empty(type, shape);
  std::vector<const void*> inputs;
  inputs.reserve(values.size());
  for (const auto& v : values)
    inputs.push_back(v.raw());
  if (auto i = host::first_overflow(op, update_op::assign, type, inputs,
                                    nullptr, 0, n);
      i >= 0)
    return overflow_error(fn, op, type, i);
  host::reduce(op, type, out.mutable_raw(), inputs, 0, n);
  return out;
}

namespace {

// No element along the axis: sum and prod have their identity; the others
// have no value.
caf::expected<tensor> empty_axis_result(const char* fn, reduce_op op,
                                        int64_t axis, size_t replicas,
                                        dtype out_type,
                                        const tensor_shape& out_shape) {
  switch (op) {
    case reduce_op::sum: return tensor::zeros(out_type, out_shape);
    case reduce_op::prod: return tensor::filled(out_type, out_shape, 1.0);
    default:
      return make_error(errc::invalid_argument,
                        std::string{fn} + ": " + std::string{to_string(op)}
                          + " along axis " + std::to_string(axis)
                          + " needs at least one element, but the total "
                            "count along the axis over all "
                          + std::to_string(replicas)
                          + " replicas is 0");
  }
}

// int32 / int64 along the axis into dst; returns the first element that
// overflows the dtype, or -1.
template <class S>
int64_t reduce_int_axis(reduce_op op, std::span<const tensor> values,
                        int64_t a, int64_t outer, int64_t inner,
                        size_t out_size, S* dst) {
  int64_t overflow_at = -1;
  if (op == reduce_op::sum || op == reduce_op::prod) {
    // Exact in int64; a result outside the dtype fails (V4).
    std::vector<int64_t> acc(out_size);
    auto widen = [](S x) { return static_cast<int64_t>(x); };
    bool over = false;
    auto checked = [&over, op](int64_t x, int64_t y) {
      int64_t r = 0;
      over |= op == reduce_op::sum ? __builtin_add_overflow(x, y, &r)
                                   : __builtin_mul_overflow(x, y, &r);
      return r;
    };
    accumulate_axis<S>(values, a, outer, inner, widen, checked, acc.data());
    for (size_t i = 0; i < out_size && !over; ++i) {
      over = acc[i] < std::numeric_limits<S>::min()
             || acc[i] > std::numeric_limits<S>::max();
      if (over)
        overflow_at = static_cast<int64_t>(i);
    }
    if (over && overflow_at < 0)
      overflow_at = 0;
    for (size_t i = 0; i < out_size; ++i)
      dst[i] = static_cast<S>(acc[i]);
  } else {
    std::vector<int64_t> acc(out_size);
    auto widen = [](S x) { return static_cast<int64_t>(x); };
    accumulate_axis<S>(op, values, a, outer, inner, widen, acc.data());
    for (size_t i = 0; i < out_size; ++i)
      dst[i] = static_cast<S>(acc[i]);
  }
  return overflow_at;
}

} // namespace

caf::expected<tensor> reduce_values(reduce_op op,
                                    std::span<const tensor> values,
                                    int64_t axis) {
  constexpr const char* fn = "reduce";
  if (!known_op(op))
    return unknown_op(fn, op);
  auto normalized = check_axis_request(fn, values, axis);
  if (!normalized)
    return normalized.error();
  const int64_t a = *normalized;
  const auto type = values[0].type();
  const auto& shape0 = values[0].shape();
  const auto ua = static_cast<size_t>(a);
  tensor_shape out_shape;
  for (size_t d = 0; d < shape0.size(); ++d)
    if (d != ua)
      out_shape.push_back(shape0[d]);
  const int64_t outer = product(shape0, 0, ua);
  const int64_t inner = product(shape0, ua + 1, shape0.size());
  int64_t count = 0;
  for (const auto& v : values)
    count += v.shape()[ua];
  const bool int_mean = op == reduce_op::mean && !is_floating(type);
  const auto out_type = int_mean ? dtype::float64 : type;
  if (count == 0)
    return empty_axis_result(fn, op, axis, values.size(), out_type,
                             out_shape);
  const auto out_size = static_cast<size_t>(outer * inner);
  auto out = tensor::empty(out_type, out_shape);
  int64_t overflow_at = -1;
  with_storage(type, [&](auto s, auto conv) {
    using S = decltype(s);
    if (is_floating(type) || int_mean) {
      // Floating values (and the integer mean) accumulate in double and are
      // rounded to the result dtype once.
      std::vector<double> acc(out_size);
      accumulate_axis<S>(op, values, a, outer, inner, conv, acc.data());
      if (op == reduce_op::mean)
        for (auto& x : acc)
          x /= static_cast<double>(count);
      void* dst = out.mutable_raw();
      for (size_t i = 0; i < out_size; ++i)
        store_double(out_type, dst, static_cast<int64_t>(i), acc[i]);
    } else if constexpr (std::is_same_v<S, int32_t>
                         || std::is_same_v<S, int64_t>) {
      overflow_at = reduce_int_axis<S>(op, values, a, outer, inner, out_size,
                                       out.mutable_data<S>());
    }
  });
  if (overflow_at >= 0)
    return overflow_error(fn, op, type, overflow_at);
  return out;
}

caf::expected<tensor> gather_values(std::span<const tensor> values,
                                    int64_t axis) {
  constexpr const char* fn = "gather";
  if (values.empty())
    return no_values(fn);
  if (auto err = check_dtypes(fn, values))
    return err;
  for (size_t k = 0; k < values.size(); ++k)
    if (values[k].rank() == 0)
      return make_error(errc::invalid_argument,
                        std::string{fn} + ": " + replica_name(k)
                          + " has rank 0 (shape []); gather along axis "
                          + std::to_string(axis)
                          + " expects values of rank >= 1");
  auto normalized = check_axis_request(fn, values, axis);
  if (!normalized)
    return normalized.error();
  const auto ua = static_cast<size_t>(*normalized);
  auto out_shape = values[0].shape();
  int64_t total = 0;
  for (const auto& v : values)
    total += v.shape()[ua];
  out_shape[ua] = total;
  const int64_t outer = product(out_shape, 0, ua);
  const int64_t inner = product(out_shape, ua + 1, out_shape.size());
  const auto esize = static_cast<int64_t>(size_of(values[0].type()));
  auto out = tensor::empty(values[0].type(), out_shape);
  auto* dst = static_cast<char*>(out.mutable_raw());
  for (int64_t o = 0; o < outer; ++o) {
    for (const auto& v : values) {
      const int64_t slab = v.shape()[ua] * inner * esize;
      if (slab == 0)
        continue;
      std::memcpy(dst, static_cast<const char*>(v.raw()) + o * slab,
                  static_cast<size_t>(slab));
      dst += slab;
    }
  }
  return out;
}

} // namespace varsync
