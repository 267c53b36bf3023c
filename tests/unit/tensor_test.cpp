#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <stdexcept>

#include "varsync/tensor.hpp"

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
