// Unit tests for the elementwise CPU kernels (devices/host_kernels.hpp).

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "core/half.hpp"
#include "varsync/dtype.hpp"
#include "devices/element_ops.hpp"
#include "devices/host_kernels.hpp"
#include "varsync/synchronization.hpp"

using namespace varsync;

namespace {

// -- a raw host buffer of any dtype, independent of class tensor -------------

struct buffer {
  dtype type;
  std::vector<unsigned char> bytes;

  buffer(dtype t, int64_t n)
    : type(t), bytes(static_cast<size_t>(n) * size_of(t)) {
  }

  int64_t size() const {
    return static_cast<int64_t>(bytes.size() / size_of(type));
  }
  void* data() { return bytes.data(); }
  const void* data() const { return bytes.data(); }

  void set(int64_t i, double v) {
    auto* p = bytes.data() + static_cast<size_t>(i) * size_of(type);
    switch (type) {
      case dtype::float16: {
        uint16_t h = float_to_float16(static_cast<float>(v));
        std::memcpy(p, &h, 2);
        break;
      }
      case dtype::bfloat16: {
        uint16_t h = float_to_bfloat16(static_cast<float>(v));
        std::memcpy(p, &h, 2);
        break;
      }
      case dtype::float32: {
        auto f = static_cast<float>(v);
        std::memcpy(p, &f, 4);
        break;
      }
      case dtype::float64: std::memcpy(p, &v, 8); break;
      case dtype::int32: {
        auto x = static_cast<int32_t>(v);
        std::memcpy(p, &x, 4);
        break;
      }
      case dtype::int64: {
        auto x = static_cast<int64_t>(v);
        std::memcpy(p, &x, 8);
        break;
      }
    }
  }

  double get(int64_t i) const {
    const auto* p = bytes.data() + static_cast<size_t>(i) * size_of(type);
    switch (type) {
      case dtype::float16: {
        uint16_t h;
        std::memcpy(&h, p, 2);
        return float16_to_float(h);
      }
      case dtype::bfloat16: {
        uint16_t h;
        std::memcpy(&h, p, 2);
        return bfloat16_to_float(h);
      }
      case dtype::float32: {
        float f;
        std::memcpy(&f, p, 4);
        return f;
      }
      case dtype::float64: {
        double d;
        std::memcpy(&d, p, 8);
        return d;
      }
      case dtype::int32: {
        int32_t x;
        std::memcpy(&x, p, 4);
        return x;
      }
      case dtype::int64: {
        int64_t x;
        std::memcpy(&x, p, 8);
        return static_cast<double>(x);
      }
    }
    return 0;
  }

  template <class T>
  T* as() {
    return reinterpret_cast<T*>(bytes.data());
  }

  bool bytes_equal_at(const buffer& other, int64_t i) const {
    auto w = size_of(type);
    return std::memcmp(bytes.data() + static_cast<size_t>(i) * w,
                       other.bytes.data() + static_cast<size_t>(i) * w, w)
           == 0;
  }
};

/// A buffer of `n` elements with value f(i) (small integers: exact in every
/// dtype, bfloat16 included).
template <class F>
buffer make_buffer(dtype t, int64_t n, F f) {
  buffer b{t, n};
  for (int64_t i = 0; i < n; ++i)
    b.set(i, f(i));
  return b;
}

/// Rounds `v` to dtype `t` (the value the kernel must store).
double round_to(dtype t, double v) {
  buffer b{t, 1};
  b.set(0, v);
  return b.get(0);
}

const std::vector<dtype> all_dtypes = {dtype::float16, dtype::bfloat16,
                                       dtype::float32, dtype::float64,
                                       dtype::int32,   dtype::int64};

// Crosses the 64-element blocks and the 2048-element chunks of the kernels.
constexpr int64_t n_elems = 4500;

double update_ref(update_op op, double c, double y) {
  switch (op) {
    case update_op::assign: return y;
    case update_op::assign_add: return c + y;
    case update_op::assign_sub: return c - y;
  }
  return 0;
}

double reduce_ref(reduce_op op, const std::vector<double>& xs) {
  double acc = xs[0];
  for (size_t k = 1; k < xs.size(); ++k) {
    switch (op) {
      case reduce_op::sum:
      case reduce_op::mean: acc += xs[k]; break;
      case reduce_op::prod: acc *= xs[k]; break;
      case reduce_op::min: acc = std::min(acc, xs[k]); break;
      case reduce_op::max: acc = std::max(acc, xs[k]); break;
    }
  }
  if (op == reduce_op::mean)
    acc /= static_cast<double>(xs.size());
  return acc;
}

std::vector<reduce_op> reduce_ops_for(dtype t) {
  std::vector<reduce_op> ops{reduce_op::sum, reduce_op::min, reduce_op::max,
                             reduce_op::prod};
  if (is_floating(t))
    ops.push_back(reduce_op::mean);
  return ops;
}

// Four contributions with small values in [-3, 3] so that every sum, product
// and mean of four (a multiple of 1/4) is exact in every dtype.
std::vector<buffer> make_contributions(dtype t, int64_t n) {
  std::vector<buffer> out;
  for (int k = 0; k < 4; ++k)
    out.push_back(
      make_buffer(t, n, [k](int64_t i) { return (i * (k + 3) + k) % 7 - 3; }));
  return out;
}

std::vector<const void*> pointers(const std::vector<buffer>& bs) {
  std::vector<const void*> ps;
  for (auto& b : bs)
    ps.push_back(b.data());
  return ps;
}

std::vector<void*> mutable_pointers(std::vector<buffer>& bs) {
  std::vector<void*> ps;
  for (auto& b : bs)
    ps.push_back(b.data());
  return ps;
}

std::vector<buffer> random_buffers(dtype t, int count, int64_t n,
                                   unsigned seed) {
  std::mt19937 gen{seed};
  std::uniform_real_distribution<double> dist{-100.0, 100.0};
  std::vector<buffer> out;
  for (int k = 0; k < count; ++k) {
    buffer b{t, n};
    for (int64_t i = 0; i < n; ++i)
      b.set(i, is_floating(t) ? dist(gen) : std::round(dist(gen)));
    out.push_back(std::move(b));
  }
  return out;
}

} // namespace

// -- apply_update -------------------------------------------------------------

TEST_CASE("host kernels: apply_update assigns, adds and subtracts for every "
          "dtype") {
  auto t = GENERATE(from_range(all_dtypes));
  auto op = GENERATE(update_op::assign, update_op::assign_add,
                     update_op::assign_sub);
  CAPTURE(to_string(t), to_string(op));
  auto dst = make_buffer(t, n_elems, [](int64_t i) { return i % 17 - 5; });
  auto y = make_buffer(t, n_elems, [](int64_t i) { return i % 13 - 6; });
  const auto before = dst;
  host::apply_update(op, t, dst.data(), y.data(), 0, n_elems);
  for (int64_t i = 0; i < n_elems; ++i) {
    INFO("element " << i);
    REQUIRE(dst.get(i) == update_ref(op, before.get(i), y.get(i)));
  }
}

TEST_CASE("host kernels: apply_update only touches the requested slice of "
          "elements") {
  auto t = GENERATE(from_range(all_dtypes));
  auto op = GENERATE(update_op::assign, update_op::assign_add,
                     update_op::assign_sub);
  auto [begin, end] = GENERATE(std::pair<int64_t, int64_t>{0, 1},
                               std::pair<int64_t, int64_t>{3, 70},
                               std::pair<int64_t, int64_t>{2047, 4097},
                               std::pair<int64_t, int64_t>{4499, 4500},
                               std::pair<int64_t, int64_t>{10, 10});
  CAPTURE(to_string(t), to_string(op), begin, end);
  auto dst = make_buffer(t, n_elems, [](int64_t i) { return i % 11 + 1; });
  auto y = make_buffer(t, n_elems, [](int64_t i) { return i % 5 + 20; });
  const auto before = dst;
  host::apply_update(op, t, dst.data(), y.data(), begin, end);
  for (int64_t i = 0; i < n_elems; ++i) {
    INFO("element " << i);
    if (i >= begin && i < end)
      REQUIRE(dst.get(i) == update_ref(op, before.get(i), y.get(i)));
    else
      REQUIRE(dst.bytes_equal_at(before, i));
  }
}

TEST_CASE("host kernels: apply_update works in place when dst is y") {
  auto t = GENERATE(from_range(all_dtypes));
  CAPTURE(to_string(t));
  auto x = make_buffer(t, 300, [](int64_t i) { return i % 9 - 4; });
  const auto before = x;
  host::apply_update(update_op::assign_add, t, x.data(), x.data(), 0, 300);
  for (int64_t i = 0; i < 300; ++i)
    REQUIRE(x.get(i) == 2 * before.get(i));
  host::apply_update(update_op::assign_sub, t, x.data(), x.data(), 0, 300);
  for (int64_t i = 0; i < 300; ++i)
    REQUIRE(x.get(i) == 0);
  host::apply_update(update_op::assign, t, x.data(), x.data(), 0, 300);
  for (int64_t i = 0; i < 300; ++i)
    REQUIRE(x.get(i) == 0);
}

TEST_CASE("host kernels: integer updates wrap around without undefined "
          "behavior") {
  buffer a{dtype::int32, 2};
  buffer b{dtype::int32, 2};
  a.as<int32_t>()[0] = std::numeric_limits<int32_t>::max();
  a.as<int32_t>()[1] = std::numeric_limits<int32_t>::min();
  b.as<int32_t>()[0] = 1;
  b.as<int32_t>()[1] = 1;
  host::apply_update(update_op::assign_add, dtype::int32, a.data(), b.data(),
                     0, 1);
  host::apply_update(update_op::assign_sub, dtype::int32, a.data(), b.data(),
                     1, 2);
  CHECK(a.as<int32_t>()[0] == std::numeric_limits<int32_t>::min());
  CHECK(a.as<int32_t>()[1] == std::numeric_limits<int32_t>::max());

  buffer c{dtype::int64, 1};
  buffer d{dtype::int64, 1};
  c.as<int64_t>()[0] = std::numeric_limits<int64_t>::max();
  d.as<int64_t>()[0] = 2;
  host::apply_update(update_op::assign_add, dtype::int64, c.data(), d.data(),
                     0, 1);
  CHECK(c.as<int64_t>()[0] == std::numeric_limits<int64_t>::min() + 1);
}

// -- reduce -------------------------------------------------------------------

TEST_CASE("host kernels: reduce computes every op elementwise for every "
          "dtype") {
  auto t = GENERATE(from_range(all_dtypes));
  CAPTURE(to_string(t));
  auto inputs = make_contributions(t, n_elems);
  auto ptrs = pointers(inputs);
  for (auto op : reduce_ops_for(t)) {
    CAPTURE(to_string(op));
    buffer out{t, n_elems};
    host::reduce(op, t, out.data(), ptrs, 0, n_elems);
    for (int64_t i = 0; i < n_elems; ++i) {
      std::vector<double> xs;
      for (auto& in : inputs)
        xs.push_back(in.get(i));
      INFO("element " << i);
      REQUIRE(out.get(i) == round_to(t, reduce_ref(op, xs)));
    }
  }
}

TEST_CASE("host kernels: reduce only writes the requested slice of elements") {
  auto t = GENERATE(from_range(all_dtypes));
  auto [begin, end] = GENERATE(std::pair<int64_t, int64_t>{0, 5},
                               std::pair<int64_t, int64_t>{63, 2100},
                               std::pair<int64_t, int64_t>{4000, 4500});
  CAPTURE(to_string(t), begin, end);
  auto inputs = make_contributions(t, n_elems);
  auto out = make_buffer(t, n_elems, [](int64_t) { return 42; });
  const auto before = out;
  host::reduce(reduce_op::sum, t, out.data(), pointers(inputs), begin, end);
  for (int64_t i = 0; i < n_elems; ++i) {
    INFO("element " << i);
    if (i >= begin && i < end) {
      double s = 0;
      for (auto& in : inputs)
        s += in.get(i);
      REQUIRE(out.get(i) == s);
    } else {
      REQUIRE(out.bytes_equal_at(before, i));
    }
  }
}

TEST_CASE("host kernels: reduce of a single input copies it") {
  auto t = GENERATE(from_range(all_dtypes));
  CAPTURE(to_string(t));
  auto in = random_buffers(t, 1, 500, 7);
  buffer out{t, 500};
  host::reduce(reduce_op::sum, t, out.data(), pointers(in), 0, 500);
  CHECK(out.bytes == in[0].bytes);
}

TEST_CASE("host kernels: reduce may write into one of its inputs") {
  auto t = GENERATE(from_range(all_dtypes));
  CAPTURE(to_string(t));
  auto inputs = make_contributions(t, n_elems);
  auto expected = inputs;
  buffer ref{t, n_elems};
  host::reduce(reduce_op::sum, t, ref.data(), pointers(expected), 0, n_elems);
  host::reduce(reduce_op::sum, t, inputs[0].data(), pointers(inputs), 0,
               n_elems);
  CHECK(inputs[0].bytes == ref.bytes);
}

TEST_CASE("host kernels: reduce mean divides the sum by the input count") {
  auto t = GENERATE(dtype::float16, dtype::bfloat16, dtype::float32,
                    dtype::float64);
  CAPTURE(to_string(t));
  auto a = make_buffer(t, 3, [](int64_t i) { return static_cast<double>(i); });
  auto b = make_buffer(t, 3, [](int64_t i) { return i * 2.0 + 1; });
  std::vector<const void*> ptrs{a.data(), b.data()};
  buffer out{t, 3};
  host::reduce(reduce_op::mean, t, out.data(), ptrs, 0, 3);
  CHECK(out.get(0) == 0.5);
  CHECK(out.get(1) == 2.0);
  CHECK(out.get(2) == 3.5);
}

TEST_CASE("host kernels: reduce rejects integer mean and empty inputs") {
  auto t = GENERATE(dtype::int32, dtype::int64);
  auto a = make_buffer(t, 4, [](int64_t i) { return static_cast<double>(i); });
  std::vector<const void*> ptrs{a.data()};
  buffer out{t, 4};
  CHECK_THROWS_AS(host::reduce(reduce_op::mean, t, out.data(), ptrs, 0, 4),
                  std::invalid_argument);
  CHECK_THROWS_AS(host::reduce(reduce_op::sum, t, out.data(), {}, 0, 4),
                  std::invalid_argument);
  std::vector<void*> comps{out.data()};
  CHECK_THROWS_AS(host::reduce_and_apply(reduce_op::mean, update_op::assign, t,
                                         ptrs, comps, 0, 4),
                  std::invalid_argument);
  CHECK_THROWS_AS(host::reduce_and_apply(reduce_op::sum, update_op::assign, t,
                                         {}, comps, 0, 4),
                  std::invalid_argument);
}

TEST_CASE("host kernels: integer sums and products wrap like unsigned "
          "arithmetic") {
  SECTION("int32") {
    buffer a{dtype::int32, 2};
    buffer b{dtype::int32, 2};
    a.as<int32_t>()[0] = std::numeric_limits<int32_t>::max();
    b.as<int32_t>()[0] = 1;
    a.as<int32_t>()[1] = 65536;
    b.as<int32_t>()[1] = 65536;
    std::vector<const void*> ptrs{a.data(), b.data()};
    buffer out{dtype::int32, 2};
    host::reduce(reduce_op::sum, dtype::int32, out.data(), ptrs, 0, 1);
    host::reduce(reduce_op::prod, dtype::int32, out.data(), ptrs, 1, 2);
    CHECK(out.as<int32_t>()[0] == std::numeric_limits<int32_t>::min());
    CHECK(out.as<int32_t>()[1] == 0); // 2^32 wraps to 0
  }
  SECTION("int64") {
    buffer a{dtype::int64, 2};
    buffer b{dtype::int64, 2};
    a.as<int64_t>()[0] = std::numeric_limits<int64_t>::min();
    b.as<int64_t>()[0] = -1;
    a.as<int64_t>()[1] = std::numeric_limits<int64_t>::min();
    b.as<int64_t>()[1] = -1;
    std::vector<const void*> ptrs{a.data(), b.data()};
    buffer out{dtype::int64, 2};
    host::reduce(reduce_op::sum, dtype::int64, out.data(), ptrs, 0, 1);
    host::reduce(reduce_op::prod, dtype::int64, out.data(), ptrs, 1, 2);
    CHECK(out.as<int64_t>()[0] == std::numeric_limits<int64_t>::max());
    CHECK(out.as<int64_t>()[1] == std::numeric_limits<int64_t>::min());
  }
}

TEST_CASE("host kernels: floating min and max propagate NaN") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  buffer a{dtype::float32, 2};
  buffer b{dtype::float32, 2};
  a.as<float>()[0] = nan;
  b.as<float>()[0] = 1.0f;
  a.as<float>()[1] = 1.0f;
  b.as<float>()[1] = nan;
  std::vector<const void*> ptrs{a.data(), b.data()};
  for (auto op : {reduce_op::min, reduce_op::max}) {
    buffer out{dtype::float32, 2};
    host::reduce(op, dtype::float32, out.data(), ptrs, 0, 2);
    CHECK(std::isnan(out.as<float>()[0]));
    CHECK(std::isnan(out.as<float>()[1]));
  }
}

// -- reduce_and_apply ---------------------------------------------------------

TEST_CASE("host kernels: reduce_and_apply sums contributions into every "
          "component") {
  auto t = GENERATE(from_range(all_dtypes));
  CAPTURE(to_string(t));
  auto contributions = make_contributions(t, n_elems);
  std::vector<buffer> components;
  for (int c = 0; c < 3; ++c)
    components.push_back(
      make_buffer(t, n_elems, [c](int64_t i) { return (i + c) % 5; }));
  const auto before = components;
  auto comps = mutable_pointers(components);
  host::reduce_and_apply(reduce_op::sum, update_op::assign_add, t,
                         pointers(contributions), comps, 0, n_elems);
  for (size_t c = 0; c < components.size(); ++c) {
    for (int64_t i = 0; i < n_elems; ++i) {
      double y = 0;
      for (auto& in : contributions)
        y += in.get(i);
      INFO("component " << c << ", element " << i);
      REQUIRE(components[c].get(i) == before[c].get(i) + y);
    }
  }
}

TEST_CASE("host kernels: reduce_and_apply handles every reduce and update op "
          "for every dtype") {
  auto t = GENERATE(from_range(all_dtypes));
  auto uop = GENERATE(update_op::assign, update_op::assign_add,
                      update_op::assign_sub);
  CAPTURE(to_string(t), to_string(uop));
  auto contributions = make_contributions(t, n_elems);
  for (auto rop : reduce_ops_for(t)) {
    CAPTURE(to_string(rop));
    std::vector<buffer> components;
    for (int c = 0; c < 2; ++c)
      components.push_back(
        make_buffer(t, n_elems, [c](int64_t i) { return (i * 3 + c) % 7; }));
    const auto before = components;
    auto comps = mutable_pointers(components);
    host::reduce_and_apply(rop, uop, t, pointers(contributions), comps, 0,
                           n_elems);
    for (size_t c = 0; c < components.size(); ++c) {
      for (int64_t i = 0; i < n_elems; ++i) {
        std::vector<double> xs;
        for (auto& in : contributions)
          xs.push_back(in.get(i));
        const double y = round_to(t, reduce_ref(rop, xs));
        INFO("component " << c << ", element " << i);
        REQUIRE(components[c].get(i)
                == round_to(t, update_ref(uop, before[c].get(i), y)));
      }
    }
  }
}

TEST_CASE("host kernels: reduce_and_apply matches reduce followed by "
          "apply_update bit for bit") {
  auto t = GENERATE(from_range(all_dtypes));
  auto uop = GENERATE(update_op::assign, update_op::assign_add,
                      update_op::assign_sub);
  CAPTURE(to_string(t), to_string(uop));
  constexpr int64_t n = 3000;
  auto contributions = random_buffers(t, 3, n, 11);
  for (auto rop : reduce_ops_for(t)) {
    CAPTURE(to_string(rop));
    auto fused = random_buffers(t, 2, n, 23);
    auto reference = fused;
    auto comps = mutable_pointers(fused);
    host::reduce_and_apply(rop, uop, t, pointers(contributions), comps, 0, n);
    buffer y{t, n};
    host::reduce(rop, t, y.data(), pointers(contributions), 0, n);
    for (auto& r : reference)
      host::apply_update(uop, t, r.data(), y.data(), 0, n);
    for (size_t c = 0; c < fused.size(); ++c)
      CHECK(fused[c].bytes == reference[c].bytes);
  }
}

TEST_CASE("host kernels: reduce_and_apply with one contribution applies it "
          "unchanged") {
  auto t = GENERATE(from_range(all_dtypes));
  CAPTURE(to_string(t));
  auto contribution = random_buffers(t, 1, 777, 5);
  auto components = random_buffers(t, 3, 777, 6);
  auto comps = mutable_pointers(components);
  // The reduce op does not matter for a single contribution: y = x.
  host::reduce_and_apply(reduce_op::sum, update_op::assign, t,
                         pointers(contribution), comps, 0, 777);
  for (auto& c : components)
    CHECK(c.bytes == contribution[0].bytes);
  if (is_floating(t)) {
    host::reduce_and_apply(reduce_op::mean, update_op::assign_sub, t,
                           pointers(contribution), comps, 0, 777);
    for (auto& c : components)
      for (int64_t i = 0; i < 777; ++i)
        REQUIRE(c.get(i) == 0);
  }
}

// -- reduce_and_apply_mirrored -------------------------------------------------

namespace {

/// Sets a few elements of b to values that stress the fused loops: NaN,
/// infinities and -0.0 for floating dtypes, the extremes for integers (sums
/// of them wrap).
void add_special_values(buffer& b) {
  auto n = b.size();
  if (n < 8)
    return;
  if (is_floating(b.type)) {
    b.set(1, std::numeric_limits<double>::quiet_NaN());
    b.set(3, std::numeric_limits<double>::infinity());
    b.set(5, -std::numeric_limits<double>::infinity());
    b.set(7, -0.0);
  } else if (b.type == dtype::int32) {
    b.set(1, std::numeric_limits<int32_t>::max());
    b.set(3, std::numeric_limits<int32_t>::min());
  } else {
    auto* p = static_cast<int64_t*>(b.data());
    p[1] = std::numeric_limits<int64_t>::max();
    p[3] = std::numeric_limits<int64_t>::min();
  }
}

} // namespace

TEST_CASE("host kernels: reduce_and_apply_mirrored equals reduce_and_apply "
          "on equal components, bit for bit") {
  auto t = GENERATE(from_range(all_dtypes));
  auto uop = GENERATE(update_op::assign, update_op::assign_add,
                      update_op::assign_sub);
  // 2..8 take the fused loops for sums; 1 and 9 the chunked kernel.
  auto replicas = GENERATE(1, 2, 3, 4, 5, 8, 9);
  auto [begin, end] = GENERATE(std::pair<int64_t, int64_t>{0, 3000},
                               std::pair<int64_t, int64_t>{13, 2077},
                               std::pair<int64_t, int64_t>{64, 128});
  CAPTURE(to_string(t), to_string(uop), replicas, begin, end);
  constexpr int64_t n = 3000;
  auto contributions = random_buffers(t, replicas, n, 31);
  for (auto& c : contributions)
    add_special_values(c);
  for (auto rop : reduce_ops_for(t)) {
    CAPTURE(to_string(rop));
    auto base = random_buffers(t, 1, n, 37)[0];
    add_special_values(base);
    std::vector<buffer> mirrored(static_cast<size_t>(replicas), base);
    auto reference = mirrored;
    auto mirrored_ptrs = mutable_pointers(mirrored);
    auto reference_ptrs = mutable_pointers(reference);
    host::reduce_and_apply_mirrored(rop, uop, t, pointers(contributions),
                                    mirrored_ptrs, begin, end);
    host::reduce_and_apply(rop, uop, t, pointers(contributions),
                           reference_ptrs, begin, end);
    for (size_t c = 0; c < mirrored.size(); ++c) {
      INFO("component " << c);
      REQUIRE(mirrored[c].bytes == reference[c].bytes);
    }
    // Outside [begin, end) nothing changed.
    auto width = static_cast<ptrdiff_t>(size_of(t));
    for (auto& c : mirrored) {
      REQUIRE(std::equal(c.bytes.begin(), c.bytes.begin() + begin * width,
                         base.bytes.begin()));
      REQUIRE(std::equal(c.bytes.begin() + end * width, c.bytes.end(),
                         base.bytes.begin() + end * width));
    }
  }
}

TEST_CASE("host kernels: reduce_and_apply_mirrored with one contribution "
          "and several components applies it to all") {
  auto t = GENERATE(from_range(all_dtypes));
  CAPTURE(to_string(t));
  auto contribution = random_buffers(t, 1, 500, 41);
  auto base = random_buffers(t, 1, 500, 43)[0];
  std::vector<buffer> components(3, base);
  auto reference = components;
  auto comps = mutable_pointers(components);
  auto ref = mutable_pointers(reference);
  host::reduce_and_apply_mirrored(reduce_op::sum, update_op::assign_add, t,
                                  pointers(contribution), comps, 0, 500);
  host::reduce_and_apply(reduce_op::sum, update_op::assign_add, t,
                         pointers(contribution), ref, 0, 500);
  for (size_t c = 0; c < components.size(); ++c)
    CHECK(components[c].bytes == reference[c].bytes);
}

TEST_CASE("host kernels: reduce_and_apply only touches the requested slice "
          "of elements") {
  auto t = GENERATE(from_range(all_dtypes));
  auto [begin, end] = GENERATE(std::pair<int64_t, int64_t>{0, 16},
                               std::pair<int64_t, int64_t>{17, 2100},
                               std::pair<int64_t, int64_t>{4480, 4500});
  CAPTURE(to_string(t), begin, end);
  auto contributions = make_contributions(t, n_elems);
  std::vector<buffer> components;
  for (int c = 0; c < 2; ++c)
    components.push_back(make_buffer(t, n_elems, [](int64_t) { return 9; }));
  const auto before = components;
  auto comps = mutable_pointers(components);
  host::reduce_and_apply(reduce_op::max, update_op::assign, t,
                         pointers(contributions), comps, begin, end);
  for (size_t c = 0; c < components.size(); ++c) {
    for (int64_t i = 0; i < n_elems; ++i) {
      INFO("component " << c << ", element " << i);
      if (i >= begin && i < end) {
        std::vector<double> xs;
        for (auto& in : contributions)
          xs.push_back(in.get(i));
        REQUIRE(components[c].get(i) == reduce_ref(reduce_op::max, xs));
      } else {
        REQUIRE(components[c].bytes_equal_at(before[c], i));
      }
    }
  }
}

TEST_CASE("host kernels: slices processed by separate workers give the "
          "whole-range result") {
  auto t = GENERATE(from_range(all_dtypes));
  CAPTURE(to_string(t));
  constexpr int64_t n = 5000;
  auto contributions = random_buffers(t, 4, n, 3);
  auto whole = random_buffers(t, 3, n, 4);
  auto sliced = whole;
  auto whole_ptrs = mutable_pointers(whole);
  auto sliced_ptrs = mutable_pointers(sliced);
  host::reduce_and_apply(reduce_op::sum, update_op::assign_add, t,
                         pointers(contributions), whole_ptrs, 0, n);
  const std::vector<int64_t> cuts{0, 1, 100, 2048, 2049, 4000, 4999, n};
  for (size_t w = 0; w + 1 < cuts.size(); ++w)
    host::reduce_and_apply(reduce_op::sum, update_op::assign_add, t,
                           pointers(contributions), sliced_ptrs, cuts[w],
                           cuts[w + 1]);
  for (size_t c = 0; c < whole.size(); ++c)
    CHECK(whole[c].bytes == sliced[c].bytes);
}

// -- split_assign -------------------------------------------------------------

TEST_CASE("host kernels: split_assign divides floating values by the replica "
          "count") {
  auto t = GENERATE(dtype::float16, dtype::bfloat16, dtype::float32,
                    dtype::float64);
  auto n = GENERATE(1, 2, 3, 4, 8);
  CAPTURE(to_string(t), n);
  auto x = make_buffer(t, 200, [](int64_t i) { return i % 23 - 11.5; });
  for (int rank = 0; rank < n; ++rank) {
    buffer dst{t, 200};
    host::split_assign(t, dst.data(), x.data(), 0, 200, rank, n);
    for (int64_t i = 0; i < 200; ++i) {
      // Divided in the dtype's arithmetic (float for the 16-bit types).
      double expected = t == dtype::float64
                          ? x.get(i) / n
                          : round_to(t, static_cast<float>(x.get(i))
                                          / static_cast<float>(n));
      INFO("rank " << rank << ", element " << i);
      REQUIRE(dst.get(i) == expected);
    }
  }
  // Powers of two split exactly: the components add up to x.
  if (n == 1 || n == 2 || n == 4 || n == 8) {
    buffer dst{t, 200};
    host::split_assign(t, dst.data(), x.data(), 0, 200, 0, n);
    for (int64_t i = 0; i < 200; ++i)
      REQUIRE(dst.get(i) * n == x.get(i));
  }
}

namespace {

template <class T>
void check_int_split(const std::vector<T>& xs, int n) {
  constexpr dtype t = dtype_of_v<T>;
  const auto count = static_cast<int64_t>(xs.size());
  buffer x{t, count};
  std::copy(xs.begin(), xs.end(), x.as<T>());
  std::vector<buffer> parts;
  for (int rank = 0; rank < n; ++rank) {
    buffer dst{t, count};
    host::split_assign(t, dst.data(), x.data(), 0, count, rank, n);
    parts.push_back(std::move(dst));
  }
  for (int64_t i = 0; i < count; ++i) {
    const T v = xs[static_cast<size_t>(i)];
    // Python floor semantics: v = q * n + r with 0 <= r < n.
    T q = v / n;
    T r = v % n;
    if (r < 0) {
      q -= 1;
      r += n;
    }
    T sum = 0;
    T lo = std::numeric_limits<T>::max();
    T hi = std::numeric_limits<T>::min();
    for (int rank = 0; rank < n; ++rank) {
      const T part = parts[static_cast<size_t>(rank)].template as<T>()[i];
      INFO("x " << v << ", n " << n << ", rank " << rank);
      REQUIRE(part == q + (rank < r ? 1 : 0));
      // Partial sums stay between 0 and v: no overflow.
      sum = static_cast<T>(sum + part);
      lo = std::min(lo, part);
      hi = std::max(hi, part);
    }
    INFO("x " << v << ", n " << n);
    REQUIRE(sum == v);
    REQUIRE(hi - lo <= 1);
  }
}

template <class T>
std::vector<T> split_samples() {
  std::vector<T> xs;
  for (T v = -40; v <= 40; ++v)
    xs.push_back(v);
  xs.push_back(std::numeric_limits<T>::min());
  xs.push_back(std::numeric_limits<T>::min() + 1);
  xs.push_back(std::numeric_limits<T>::max());
  xs.push_back(std::numeric_limits<T>::max() - 1);
  // Enough elements to cover the kernels' blocks and a tail.
  for (int i = 0; i < 150; ++i)
    xs.push_back(static_cast<T>(i * 7919 - 500000));
  return xs;
}

} // namespace

TEST_CASE("host kernels: split_assign splits integers exactly with floor "
          "division") {
  auto n = GENERATE(1, 2, 3, 4, 5, 7, 8, 16);
  CAPTURE(n);
  SECTION("int32") {
    check_int_split<int32_t>(split_samples<int32_t>(), n);
  }
  SECTION("int64") {
    check_int_split<int64_t>(split_samples<int64_t>(), n);
  }
}

TEST_CASE("host kernels: split_assign gives the remainder to the first "
          "replicas, also for negative values") {
  auto t = GENERATE(dtype::int32, dtype::int64);
  CAPTURE(to_string(t));
  auto split = [t](double v, int n) {
    buffer x{t, 1};
    x.set(0, v);
    std::vector<double> out;
    for (int rank = 0; rank < n; ++rank) {
      buffer dst{t, 1};
      host::split_assign(t, dst.data(), x.data(), 0, 1, rank, n);
      out.push_back(dst.get(0));
    }
    return out;
  };
  CHECK(split(-7, 2) == std::vector<double>{-3, -4}); // q = -4, r = 1
  CHECK(split(7, 2) == std::vector<double>{4, 3});
  CHECK(split(10, 4) == std::vector<double>{3, 3, 2, 2});
  CHECK(split(-10, 4) == std::vector<double>{-2, -2, -3, -3});
  CHECK(split(12, 4) == std::vector<double>{3, 3, 3, 3});
  CHECK(split(-12, 3) == std::vector<double>{-4, -4, -4});
  CHECK(split(2, 5) == std::vector<double>{1, 1, 0, 0, 0});
  CHECK(split(-2, 5) == std::vector<double>{0, 0, 0, -1, -1});
}

TEST_CASE("host kernels: split_assign handles the extreme 64-bit values") {
  const auto min = std::numeric_limits<int64_t>::min();
  const auto max = std::numeric_limits<int64_t>::max();
  buffer x{dtype::int64, 2};
  x.as<int64_t>()[0] = min;
  x.as<int64_t>()[1] = max;
  buffer r0{dtype::int64, 2};
  buffer r1{dtype::int64, 2};
  host::split_assign(dtype::int64, r0.data(), x.data(), 0, 2, 0, 2);
  host::split_assign(dtype::int64, r1.data(), x.data(), 0, 2, 1, 2);
  CHECK(r0.as<int64_t>()[0] == min / 2);
  CHECK(r1.as<int64_t>()[0] == min / 2);
  CHECK(r0.as<int64_t>()[1] == max / 2 + 1);
  CHECK(r1.as<int64_t>()[1] == max / 2);
  buffer only{dtype::int64, 2};
  host::split_assign(dtype::int64, only.data(), x.data(), 0, 2, 0, 1);
  CHECK(only.bytes == x.bytes);
}

TEST_CASE("host kernels: split_assign only writes the requested slice and "
          "works in place") {
  auto t = GENERATE(from_range(all_dtypes));
  CAPTURE(to_string(t));
  auto x = make_buffer(t, 300, [](int64_t i) { return i % 10 * 4.0; });
  auto dst = make_buffer(t, 300, [](int64_t) { return -1; });
  host::split_assign(t, dst.data(), x.data(), 100, 200, 1, 4);
  for (int64_t i = 0; i < 300; ++i) {
    INFO("element " << i);
    REQUIRE(dst.get(i) == (i >= 100 && i < 200 ? x.get(i) / 4 : -1.0));
  }
  auto in_place = x;
  host::split_assign(t, in_place.data(), in_place.data(), 0, 300, 3, 4);
  for (int64_t i = 0; i < 300; ++i)
    REQUIRE(in_place.get(i) == x.get(i) / 4);
}

TEST_CASE("host kernels: split_assign rejects a rank outside the replicas") {
  buffer x{dtype::float32, 4};
  buffer dst{dtype::float32, 4};
  CHECK_THROWS_AS(
    host::split_assign(dtype::float32, dst.data(), x.data(), 0, 4, 2, 2),
    std::invalid_argument);
  CHECK_THROWS_AS(
    host::split_assign(dtype::float32, dst.data(), x.data(), 0, 4, -1, 2),
    std::invalid_argument);
  CHECK_THROWS_AS(
    host::split_assign(dtype::int32, dst.data(), x.data(), 0, 4, 0, 0),
    std::invalid_argument);
}

// -- 16-bit floats ------------------------------------------------------------

TEST_CASE("host kernels: float16 and bfloat16 round-trip through float") {
  for (uint32_t bits = 0; bits <= 0xffffu; ++bits) {
    const auto h = static_cast<uint16_t>(bits);
    const float f16 = float16_to_float(h);
    if (!std::isnan(f16))
      REQUIRE(float_to_float16(f16) == h);
    else
      REQUIRE(std::isnan(float16_to_float(float_to_float16(f16))));
    const float bf = bfloat16_to_float(h);
    if (!std::isnan(bf))
      REQUIRE(float_to_bfloat16(bf) == h);
    else
      REQUIRE(std::isnan(bfloat16_to_float(float_to_bfloat16(bf))));
  }
  CHECK(float16_to_float(0x3c00) == 1.0f);
  CHECK(float16_to_float(0x7bff) == 65504.0f);
  CHECK(float16_to_float(0x0001) == std::ldexp(1.0f, -24));
  CHECK(bfloat16_to_float(0x3f80) == 1.0f);
}

TEST_CASE("host kernels: 16-bit arithmetic is done in float and rounded to "
          "nearest even") {
  SECTION("float16") {
    // 2048 + 1 = 2049 is a tie between 2048 and 2050: rounds to even 2048.
    auto a = make_buffer(dtype::float16, 3, [](int64_t) { return 2048; });
    auto b = make_buffer(dtype::float16, 3, [](int64_t i) {
      return i == 0 ? 1 : i == 1 ? 3 : 0.5;
    });
    host::apply_update(update_op::assign_add, dtype::float16, a.data(),
                       b.data(), 0, 3);
    CHECK(a.get(0) == 2048);
    CHECK(a.get(1) == 2052); // 2051 ties to even 2052
    CHECK(a.get(2) == 2048);
    // Overflow past 65504 gives infinity.
    auto big = make_buffer(dtype::float16, 1, [](int64_t) { return 65504; });
    std::vector<const void*> ptrs{big.data(), big.data()};
    buffer out{dtype::float16, 1};
    host::reduce(reduce_op::sum, dtype::float16, out.data(), ptrs, 0, 1);
    CHECK(std::isinf(out.get(0)));
    // The mean is computed in float before rounding, so it does not overflow.
    host::reduce(reduce_op::mean, dtype::float16, out.data(), ptrs, 0, 1);
    CHECK(out.get(0) == 65504);
  }
  SECTION("bfloat16") {
    auto a = make_buffer(dtype::bfloat16, 2, [](int64_t) { return 256; });
    auto b = make_buffer(dtype::bfloat16, 2,
                         [](int64_t i) { return i == 0 ? 1 : 3; });
    host::apply_update(update_op::assign_add, dtype::bfloat16, a.data(),
                       b.data(), 0, 2);
    CHECK(a.get(0) == 256); // 257 ties to even 256
    CHECK(a.get(1) == 260); // 259 ties to even 260
    auto third = make_buffer(dtype::bfloat16, 1, [](int64_t) { return 1; });
    buffer dst{dtype::bfloat16, 1};
    host::split_assign(dtype::bfloat16, dst.data(), third.data(), 0, 1, 0, 3);
    CHECK(dst.get(0) == static_cast<double>(bfloat16_to_float(
            float_to_bfloat16(1.0f / 3.0f))));
  }
}

namespace {

float load16(dtype t, uint16_t h) {
  return t == dtype::float16 ? float16_to_float(h) : bfloat16_to_float(h);
}

uint16_t store16(dtype t, float f) {
  return t == dtype::float16 ? float_to_float16(f) : float_to_bfloat16(f);
}

/// Same bits, or both NaN (a NaN's sign and payload may depend on operand
/// order, which the compiler may swap).
bool same16(dtype t, uint16_t a, uint16_t b) {
  return a == b || (std::isnan(load16(t, a)) && std::isnan(load16(t, b)));
}

} // namespace

TEST_CASE("host kernels: 16-bit kernels convert and round exactly like "
          "core/half.hpp for every bit pattern") {
  auto t = GENERATE(dtype::float16, dtype::bfloat16);
  CAPTURE(to_string(t));
  constexpr int64_t n = 65536;
  // a: every bit pattern (zeros, subnormals, normals, inf, NaN); b: random.
  buffer a{t, n};
  buffer b{t, n};
  std::mt19937 gen{42};
  for (int64_t i = 0; i < n; ++i) {
    a.as<uint16_t>()[i] = static_cast<uint16_t>(i);
    b.as<uint16_t>()[i] = static_cast<uint16_t>(gen());
  }
  auto fa = [&](int64_t i) { return load16(t, a.as<uint16_t>()[i]); };
  auto fb = [&](int64_t i) { return load16(t, b.as<uint16_t>()[i]); };
  std::vector<const void*> ptrs{a.data(), b.data()};
  auto check = [&](buffer& out, auto reference) {
    for (int64_t i = 0; i < n; ++i) {
      const uint16_t expected = store16(t, reference(i));
      INFO("element " << i << ": expected bits " << expected << ", found "
                      << out.as<uint16_t>()[i]);
      REQUIRE(same16(t, out.as<uint16_t>()[i], expected));
    }
  };
  SECTION("load and store round trip") {
    buffer out{t, n};
    host::split_assign(t, out.data(), a.data(), 0, n, 0, 1);
    check(out, [&](int64_t i) { return fa(i); });
  }
  SECTION("sum") {
    buffer out{t, n};
    host::reduce(reduce_op::sum, t, out.data(), ptrs, 0, n);
    check(out, [&](int64_t i) { return fa(i) + fb(i); });
  }
  SECTION("prod") {
    buffer out{t, n};
    host::reduce(reduce_op::prod, t, out.data(), ptrs, 0, n);
    check(out, [&](int64_t i) { return fa(i) * fb(i); });
  }
  SECTION("mean") {
    buffer out{t, n};
    host::reduce(reduce_op::mean, t, out.data(), ptrs, 0, n);
    check(out, [&](int64_t i) { return (fa(i) + fb(i)) / 2.0f; });
  }
  SECTION("assign_sub") {
    auto out = a;
    host::apply_update(update_op::assign_sub, t, out.data(), b.data(), 0, n);
    check(out, [&](int64_t i) { return fa(i) - fb(i); });
  }
  SECTION("split by 3") {
    buffer out{t, n};
    host::split_assign(t, out.data(), a.data(), 0, n, 2, 3);
    check(out, [&](int64_t i) { return fa(i) / 3.0f; });
  }
}

TEST_CASE("host kernels: bitwise_equal compares raw bytes") {
  std::vector<unsigned char> a{1, 2, 3, 4};
  std::vector<unsigned char> b{1, 2, 3, 5};
  CHECK(host::bitwise_equal(a.data(), b.data(), 3));
  CHECK_FALSE(host::bitwise_equal(a.data(), b.data(), 4));
  CHECK(host::bitwise_equal(nullptr, nullptr, 0));
  // +0.0 and -0.0 compare equal as floats but not bitwise.
  const float pz = 0.0f;
  const float nz = -0.0f;
  CHECK_FALSE(host::bitwise_equal(&pz, &nz, sizeof(float)));
}

TEST_CASE("host kernels: first_overflow finds integer sums, products and "
          "updates that do not fit, read-only") {
  using varsync::host::first_overflow;
  const int32_t max32 = std::numeric_limits<int32_t>::max();
  const int64_t max64 = std::numeric_limits<int64_t>::max();
  int32_t a[] = {1, max32, -5};
  int32_t b[] = {1, 1, 5};
  const void* ins[] = {a, b};
  CHECK(first_overflow(reduce_op::sum, update_op::assign, dtype::int32, ins,
                       nullptr, 0, 3)
        == 1);
  CHECK(first_overflow(reduce_op::max, update_op::assign, dtype::int32, ins,
                       nullptr, 0, 3)
        == -1);
  int32_t c[] = {max32 - 2, 0, 0};
  CHECK(first_overflow(reduce_op::sum, update_op::assign_add, dtype::int32,
                       std::span<const void* const>{ins, 1}, c, 0, 3)
        == -1); // max - 2 + 1
  c[0] = max32;
  CHECK(first_overflow(reduce_op::sum, update_op::assign_add, dtype::int32,
                       std::span<const void* const>{ins, 1}, c, 0, 3)
        == 0);
  CHECK(c[0] == max32); // nothing written
  int64_t x[] = {max64 / 2 + 1};
  int64_t two[] = {2};
  const void* prod_ins[] = {x, two};
  CHECK(first_overflow(reduce_op::prod, update_op::assign, dtype::int64,
                       prod_ins, nullptr, 0, 1)
        == 0);
  int64_t lo[] = {std::numeric_limits<int64_t>::min() + 1};
  const void* one[] = {two};
  CHECK(first_overflow(reduce_op::sum, update_op::assign_sub, dtype::int64,
                       one, lo, 0, 1)
        == 0);
  float f[] = {3.4e38f};
  const void* fin[] = {f, f};
  CHECK(first_overflow(reduce_op::sum, update_op::assign, dtype::float32, fin,
                       nullptr, 0, 1)
        == -1); // floating dtypes are never checked
}

TEST_CASE("host kernels: int32 reductions widened to int64 and narrowed back "
          "with a range check") {
  using namespace varsync::host;
  const int32_t max32 = std::numeric_limits<int32_t>::max();
  int32_t a[] = {max32, max32, -3};
  int32_t b[] = {max32, 1, 2};
  const int32_t* ins[] = {a, b};
  int64_t wide[3] = {};
  CHECK(reduce_int32_widened(reduce_op::sum, wide, ins, 0, 3) == -1);
  CHECK(wide[0] == 2 * int64_t{max32});
  CHECK(wide[1] == int64_t{max32} + 1);
  CHECK(wide[2] == -1);
  CHECK(reduce_int32_widened(reduce_op::min, wide, ins, 0, 3) == -1);
  CHECK(wide[2] == -3);
  // An int64 product that does not fit is reported at its element.
  int32_t big[] = {max32, 2};
  const int32_t* four[] = {big, big, big, big};
  CHECK(reduce_int32_widened(reduce_op::prod, wide, four, 0, 2) == 0);
  int32_t out[3] = {7, 7, 7};
  int64_t fits[] = {max32, -1, std::numeric_limits<int32_t>::min()};
  CHECK(narrow_to_int32(out, fits, 0, 3) == -1);
  CHECK(out[0] == max32);
  CHECK(out[2] == std::numeric_limits<int32_t>::min());
  int64_t over[] = {1, int64_t{max32} + 1, 2};
  int32_t keep[3] = {7, 7, 7};
  CHECK(narrow_to_int32(keep, over, 0, 3) == 1);
  CHECK(keep[0] == 7); // nothing written
}

// The overflow checks the CUDA kernels share (elem::*_overflows, no
// compiler builtins on the device) against the host compiler's builtins.
TEST_CASE("element ops: int64 add, sub and mul report overflow exactly as "
          "the compiler builtins do") {
  constexpr int64_t lo = std::numeric_limits<int64_t>::min();
  constexpr int64_t hi = std::numeric_limits<int64_t>::max();
  std::vector<int64_t> values{lo,          lo + 1,      -(int64_t{1} << 32),
                              -3037000500, -3037000499, -65536,
                              -2,          -1,          0,
                              1,           2,           65536,
                              3037000499,  3037000500,  int64_t{1} << 32,
                              hi - 1,      hi};
  std::mt19937_64 rng{7};
  for (int k = 0; k < 200; ++k)
    values.push_back(static_cast<int64_t>(rng()) >> (rng() % 63));
  for (int64_t a : values)
    for (int64_t b : values) {
      int64_t want = 0;
      int64_t got = 0;
      INFO(a << " and " << b);
      CHECK(varsync::elem::add_overflows(a, b, got)
            == __builtin_add_overflow(a, b, &want));
      CHECK(got == want);
      CHECK(varsync::elem::sub_overflows(a, b, got)
            == __builtin_sub_overflow(a, b, &want));
      CHECK(got == want);
      CHECK(varsync::elem::mul_overflows(a, b, got)
            == __builtin_mul_overflow(a, b, &want));
      CHECK(got == want);
    }
}
