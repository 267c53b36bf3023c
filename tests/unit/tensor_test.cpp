#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "core/half.hpp"
#include "varsync/error.hpp"
#include "varsync/dtype.hpp"
#include "varsync/tensor.hpp"
#include "varsync/ext/host_buffer_cache.hpp"

using namespace varsync;

TEST_CASE("tensor: copies share the buffer until one of them writes") {
  auto a = tensor::from_vector<float>({3}, {1, 2, 3});
  auto b = a;
  CHECK(a.shares_buffer_with(b));
  b.mutable_data<float>()[0] = 9;
  CHECK_FALSE(a.shares_buffer_with(b));
  CHECK(a.to_vector<float>() == std::vector<float>{1, 2, 3});
  CHECK(b.to_vector<float>() == std::vector<float>{9, 2, 3});
}

TEST_CASE("tensor: a sole owner writes in place") {
  auto a = tensor::zeros(dtype::int64, {4});
  const void* before = a.raw();
  a.mutable_data<int64_t>()[2] = 5;
  CHECK(a.raw() == before);
}

TEST_CASE("tensor: empty tensors hold no buffer of their own") {
  tensor a;
  auto b = tensor::zeros(dtype::int32, {0, 3});
  // One static, aligned, never written block behind every empty tensor.
  CHECK(a.shares_buffer_with(b));
  CHECK(a.raw() != nullptr);
  CHECK(reinterpret_cast<uintptr_t>(a.raw()) % 64 == 0);
  CHECK(a.nbytes() == 0);
  CHECK(b.nbytes() == 0);
  CHECK(a.mutable_raw() == b.raw()); // nothing to copy before a write
  // Becoming non-empty gives a tensor a buffer of its own.
  a = tensor::from_vector<float>({2}, {1, 2});
  CHECK_FALSE(a.shares_buffer_with(b));
  CHECK(a.to_vector<float>() == std::vector<float>{1, 2});
  CHECK(b.clone().bitwise_equal(b));
}

TEST_CASE("tensor: buffers are 64-byte aligned") {
  for (int64_t n : {1, 7, 100, 70000, 300000}) {
    auto t = tensor::empty(dtype::float32, {n});
    CHECK(reinterpret_cast<uintptr_t>(t.raw()) % 64 == 0);
  }
}

TEST_CASE("tensor: large buffers are recycled instead of returned to the OS") {
  const void* first = nullptr;
  {
    auto t = tensor::empty(dtype::float32, {1 << 20}); // 4 MiB
    first = t.raw();
  }
  auto again = tensor::empty(dtype::float32, {(1 << 20) - 100});
  CHECK(again.raw() == first); // same size class, taken from the pool
}

TEST_CASE("tensor: shapes, sizes and bad construction") {
  CHECK(element_count({}) == 1);
  CHECK(element_count({2, 0, 3}) == 0);
  CHECK(element_count({2, -1}) == -1);
  CHECK(to_string(tensor_shape{2, 3}) == "[2, 3]");
  CHECK_THROWS_AS(tensor::empty(dtype::float32, {-2}), std::invalid_argument);
  CHECK_THROWS_AS(tensor::from_vector<float>({3}, {1, 2}),
                  std::invalid_argument);
  char bytes[8] = {};
  CHECK_THROWS_AS(tensor::from_bytes(dtype::float32, {3}, bytes, 8),
                  std::invalid_argument);
  auto s = tensor::scalar<int32_t>(7);
  CHECK(s.rank() == 0);
  CHECK(s.size() == 1);
  CHECK(s.nbytes() == 4);
}

TEST_CASE("tensor: bitwise equality compares dtype, shape and bytes") {
  auto a = tensor::from_vector<float>({2}, {1, 2});
  CHECK(a.bitwise_equal(a.clone()));
  CHECK_FALSE(a.bitwise_equal(tensor::from_vector<float>({1, 2}, {1, 2})));
  CHECK_FALSE(a.bitwise_equal(tensor::from_vector<double>({2}, {1, 2})));
  CHECK_FALSE(
    tensor::scalar<float>(0.0f).bitwise_equal(tensor::scalar<float>(-0.0f)));
}

TEST_CASE("tensor: filled converts the value to every dtype") {
  for (auto t : {dtype::float16, dtype::bfloat16, dtype::float32,
                 dtype::float64, dtype::int32, dtype::int64}) {
    auto x = tensor::filled(t, {3}, 2.0);
    CHECK(x.type() == t);
    CHECK(x.nbytes() == 3 * size_of(t));
    for (int64_t i = 0; i < 3; ++i)
      CHECK(x.as_double(i) == 2.0);
  }
}

TEST_CASE("tensor: element counts that overflow int64 are invalid, not UB") {
  CHECK(element_count({int64_t{1} << 32, int64_t{1} << 32}) == -1);
  CHECK(element_count({int64_t{1} << 62, 4}) == -1);
  CHECK(element_count({int64_t{1} << 62, 0}) == 0);
  CHECK_THROWS_AS(tensor::empty(dtype::float32, {int64_t{1} << 32,
                                                 int64_t{1} << 32}),
                  std::invalid_argument);
}

// Both were open findings (fuzz/findings/README.md): the byte count wrapped
// (2^62 float32s got a 64-byte buffer) and the pool's size class never
// ended for more than 2^63 bytes.
TEST_CASE("tensor: byte counts that overflow size_t are refused") {
  CHECK_THROWS_AS(tensor::empty(dtype::float32, {int64_t{1} << 62}),
                  std::invalid_argument);
  CHECK_THROWS_AS(tensor::empty(dtype::float64, {int64_t{1} << 61}),
                  std::invalid_argument);
  CHECK_THROWS_AS(tensor::zeros(dtype::int64, {int64_t{1} << 40, 1 << 22}),
                  std::invalid_argument);
  // Representable but above 2^63 bytes: refused by the allocator's size
  // class instead of looping forever.
  CHECK_THROWS_AS(tensor::empty(dtype::float32, {(int64_t{1} << 61) + 1}),
                  std::bad_alloc);
}

TEST_CASE("tensor: span gives the elements of the matching dtype") {
  auto a = tensor::from_vector<float>({2, 2}, {1, 2, 3, 4});
  auto s = a.span<float>();
  REQUIRE(s);
  CHECK(s->size() == 4);
  CHECK(std::vector<float>(s->begin(), s->end())
        == std::vector<float>{1, 2, 3, 4});
}

TEST_CASE("tensor: span of the wrong dtype is a dtype_mismatch naming both") {
  auto a = tensor::from_vector<float>({3}, {1, 2, 3});
  auto s = a.span<double>();
  REQUIRE_FALSE(s);
  CHECK(has_code(s.error(), errc::dtype_mismatch));
  auto text = message_of(s.error());
  CHECK(text.find("float64") != std::string::npos);
  CHECK(text.find("float32") != std::string::npos);
  auto i = tensor::zeros(dtype::int32, {2});
  CHECK(has_code(i.span<int64_t>().error(), errc::dtype_mismatch));
}

TEST_CASE("tensor: mutable_span writes only this tensor") {
  auto a = tensor::from_vector<int64_t>({3}, {1, 2, 3});
  auto b = a;
  auto s = b.mutable_span<int64_t>();
  REQUIRE(s);
  (*s)[1] = 20;
  CHECK(a.to_vector<int64_t>() == std::vector<int64_t>{1, 2, 3});
  CHECK(b.to_vector<int64_t>() == std::vector<int64_t>{1, 20, 3});
  auto bad = b.mutable_span<int32_t>();
  REQUIRE_FALSE(bad);
  CHECK(has_code(bad.error(), errc::dtype_mismatch));
  CHECK(b.to_vector<int64_t>() == std::vector<int64_t>{1, 20, 3});
}

TEST_CASE("tensor: item returns the single element of the exact dtype") {
  auto x = tensor::scalar<double>(2.5);
  auto v = x.item<double>();
  REQUIRE(v);
  CHECK(*v == 2.5);
  // Any rank with one element.
  auto y = tensor::from_vector<int32_t>({1, 1}, {7});
  REQUIRE(y.item<int32_t>());
  CHECK(*y.item<int32_t>() == 7);
}

TEST_CASE("tensor: item of the wrong dtype is a dtype_mismatch, not a conversion") {
  auto x = tensor::scalar<float>(1.5f);
  auto v = x.item<double>();
  REQUIRE_FALSE(v);
  CHECK(has_code(v.error(), errc::dtype_mismatch));
  auto text = message_of(v.error());
  CHECK(text.find("float64") != std::string::npos);
  CHECK(text.find("float32") != std::string::npos);
}

TEST_CASE("tensor: item of a tensor without exactly one element is a shape_mismatch") {
  auto x = tensor::from_vector<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  auto v = x.item<float>();
  REQUIRE_FALSE(v);
  CHECK(has_code(v.error(), errc::shape_mismatch));
  CHECK(message_of(v.error()).find("[2, 3]") != std::string::npos);
  auto empty = tensor::zeros(dtype::float32, {0});
  CHECK(has_code(empty.item<float>().error(), errc::shape_mismatch));
}

TEST_CASE("scalar_as: the own dtype exactly, other dtypes only without loss") {
  CHECK(*scalar_as<float>(tensor::scalar<float>(0.1f), "x") == 0.1f);
  CHECK(*scalar_as<double>(tensor::scalar<float>(0.1f), "x")
        == static_cast<double>(0.1f));
  CHECK(*scalar_as<int32_t>(tensor::scalar<double>(-7.0), "x") == -7);
  CHECK(*scalar_as<int64_t>(tensor::scalar<float>(1e10f), "x")
        == int64_t{10000000000});
  CHECK(*scalar_as<double>(tensor::scalar<int64_t>(int64_t{1} << 53), "x")
        == 9007199254740992.0);
  CHECK(*scalar_as<int32_t>(tensor::scalar<int64_t>(-5), "x") == -5);
  CHECK(std::isnan(*scalar_as<float>(
    tensor::scalar<double>(std::numeric_limits<double>::quiet_NaN()), "x")));
  CHECK(std::isinf(*scalar_as<float>(
    tensor::scalar<double>(std::numeric_limits<double>::infinity()), "x")));
  // Any rank with one element.
  CHECK(*scalar_as<float>(tensor::from_vector<float>({1, 1}, {3}), "x") == 3);
}

TEST_CASE("scalar_as: a lossy conversion is a dtype_mismatch naming the value "
          "and both dtypes") {
  auto r = scalar_as<int32_t>(tensor::scalar<double>(2.5), "reading w");
  REQUIRE_FALSE(r);
  CHECK(has_code(r.error(), errc::dtype_mismatch));
  auto text = message_of(r.error());
  CHECK(text.rfind("reading w", 0) == 0);
  CHECK(text.find("2.5") != std::string::npos);
  CHECK(text.find("float64") != std::string::npos);
  CHECK(text.find("int32") != std::string::npos);
  auto lossy = [](auto r) {
    return !r && has_code(r.error(), errc::dtype_mismatch);
  };
  CHECK(lossy(scalar_as<float>(tensor::scalar<double>(0.1), "x")));
  CHECK(lossy(scalar_as<float>(tensor::scalar<double>(1e300), "x")));
  CHECK(lossy(scalar_as<int32_t>(tensor::scalar<double>(2147483648.0), "x")));
  CHECK(lossy(scalar_as<int32_t>(tensor::scalar<int64_t>(int64_t{1} << 31), "x")));
  CHECK(lossy(scalar_as<int64_t>(tensor::scalar<double>(9223372036854775808.0), "x")));
  CHECK(lossy(scalar_as<int64_t>(
    tensor::scalar<double>(std::numeric_limits<double>::infinity()), "x")));
  CHECK(lossy(scalar_as<int32_t>(
    tensor::scalar<float>(std::numeric_limits<float>::quiet_NaN()), "x")));
  CHECK(lossy(scalar_as<double>(
    tensor::scalar<int64_t>((int64_t{1} << 53) + 1), "x")));
  CHECK(lossy(scalar_as<double>(
    tensor::scalar<int64_t>(std::numeric_limits<int64_t>::max()), "x")));
  CHECK(lossy(scalar_as<float>(tensor::scalar<int64_t>((int64_t{1} << 24) + 1), "x")));
}

TEST_CASE("scalar_as: a tensor without exactly one element is a shape_mismatch") {
  auto r = scalar_as<float>(tensor::zeros(dtype::float32, {3}), "x");
  REQUIRE_FALSE(r);
  CHECK(has_code(r.error(), errc::shape_mismatch));
  CHECK(message_of(r.error()).find("[3]") != std::string::npos);
  CHECK(has_code(scalar_as<float>(tensor::zeros(dtype::float32, {0}), "x").error(),
                 errc::shape_mismatch));
}

TEST_CASE("the host buffer cache keeps freed large buffers up to its limit "
          "and frees the rest", "[tensor][memory]") {
  const size_t mib = size_t{1} << 20;
  const auto previous = set_host_buffer_cache_limit(2 * mib);
  {
    // Four 1 MiB tensors freed: two fit the limit, the others are freed.
    std::vector<tensor> xs;
    for (int i = 0; i < 4; ++i)
      xs.push_back(tensor::zeros(dtype::float32, {int64_t{1} << 18}));
  }
  CHECK(host_buffer_cache_bytes() <= 2 * mib);
  CHECK(host_buffer_cache_limit() == 2 * mib);
  // A cached buffer is reused: the cache shrinks by one when taken.
  const auto cached = host_buffer_cache_bytes();
  if (cached > 0) {
    auto x = tensor::zeros(dtype::float32, {int64_t{1} << 18});
    CHECK(host_buffer_cache_bytes() == cached - mib);
  }
  // Lowering the limit frees the excess at once; 0 disables the cache.
  CHECK(set_host_buffer_cache_limit(0) == 2 * mib);
  CHECK(host_buffer_cache_bytes() == 0);
  { auto y = tensor::zeros(dtype::float32, {int64_t{1} << 18}); }
  CHECK(host_buffer_cache_bytes() == 0);
  set_host_buffer_cache_limit(previous);
  CHECK(host_buffer_cache_limit() == previous);
}

TEST_CASE("tensor::from_floats writes float16 and bfloat16 values rounded "
          "once to nearest even, and refuses what it cannot build",
          "[issue34]") {
  auto h = tensor::from_floats(dtype::float16, {2, 2},
                               {1.5f, -0.1f, 65504.0f, 1e6f});
  REQUIRE(h.type() == dtype::float16);
  REQUIRE(h.shape() == tensor_shape{2, 2});
  auto* hb = static_cast<const uint16_t*>(h.raw());
  CHECK(hb[0] == 0x3e00); // 1.5
  CHECK(hb[1] == float_to_float16(-0.1f));
  CHECK(hb[2] == 0x7bff); // the largest float16
  CHECK(hb[3] == 0x7c00); // beyond it: infinity
  CHECK(h.to_vector<float>()[0] == 1.5f);
  // 1 + 2^-11 lies halfway between two float16 values: to the even one.
  auto tie = tensor::from_floats(dtype::float16, {1}, {1.0f + 0x1p-11f});
  CHECK(tie.to_vector<float>()[0] == 1.0f);
  auto b = tensor::from_floats(dtype::bfloat16, {3}, {1.0f, 3.0f, 1.00390625f});
  REQUIRE(b.type() == dtype::bfloat16);
  CHECK(b.to_vector<float>() == std::vector<float>{1, 3, 1}); // tie to even
  CHECK(static_cast<const uint16_t*>(b.raw())[1] == 0x4040);
  auto f = tensor::from_floats(dtype::float64, {1}, {0.1f});
  CHECK(f.to_vector<double>()[0] == static_cast<double>(0.1f));
  CHECK_THROWS_AS(tensor::from_floats(dtype::int32, {1}, {1}),
                  std::invalid_argument);
  CHECK_THROWS_AS(tensor::from_floats(dtype::float16, {3}, {1, 2}),
                  std::invalid_argument);
}
