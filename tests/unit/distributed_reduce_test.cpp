// Unit tests for the cross-replica reductions and gathers on host tensors
// (sync/distributed_reduce.hpp).

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "varsync/dtype.hpp"
#include "varsync/error.hpp"
#include "varsync/tensor.hpp"
#include "sync/distributed_reduce.hpp"
#include "varsync/synchronization.hpp"

using namespace varsync;

namespace {

/// A tensor of any dtype with the given values (converted to the dtype).
tensor make(dtype t, tensor_shape shape, const std::vector<double>& values) {
  auto out = tensor::empty(t, std::move(shape));
  REQUIRE(static_cast<size_t>(out.size()) == values.size());
  void* dst = out.mutable_raw();
  for (size_t i = 0; i < values.size(); ++i)
    store_double(t, dst, static_cast<int64_t>(i), values[i]);
  return out;
}

tensor f32(tensor_shape shape, const std::vector<double>& values) {
  return make(dtype::float32, std::move(shape), values);
}

tensor i32(tensor_shape shape, const std::vector<double>& values) {
  return make(dtype::int32, std::move(shape), values);
}

std::vector<double> values_of(const tensor& t) {
  std::vector<double> out;
  for (int64_t i = 0; i < t.size(); ++i)
    out.push_back(t.as_double(i));
  return out;
}

/// The value of a successful result; fails the test with the error otherwise.
tensor ok(caf::expected<tensor> result) {
  if (!result)
    FAIL("unexpected error: " << describe(result.error()));
  return std::move(*result);
}

/// The error of a failed result; fails the test if the call succeeded.
caf::error failed(caf::expected<tensor> result) {
  if (result)
    FAIL("expected an error, got " << result->debug_string());
  return result.error();
}

using dv = std::vector<double>;

} // namespace

// -- reduce across replicas (D3, D6) ------------------------------------------

TEST_CASE("distributed reduce: reduce_values reduces elementwise across "
          "replicas") {
  std::vector<tensor> values{f32({3}, {1, 5, -2}), f32({3}, {4, 2, -8}),
                             f32({3}, {-3, 2, 0.5})};
  CHECK(values_of(ok(reduce_values(reduce_op::sum, values))) == dv{2, 9, -9.5});
  CHECK(values_of(ok(reduce_values(reduce_op::min, values)))
        == dv{-3, 2, -8});
  CHECK(values_of(ok(reduce_values(reduce_op::max, values)))
        == dv{4, 5, 0.5});
  CHECK(values_of(ok(reduce_values(reduce_op::prod, values)))
        == dv{-12, 20, 8});
  auto mean = ok(reduce_values(reduce_op::mean, values));
  CHECK(mean.type() == dtype::float32);
  CHECK(values_of(mean) == dv{static_cast<float>(2.0 / 3), 3,
                              static_cast<float>(-9.5 / 3)});
}

TEST_CASE("distributed reduce: reduce_values keeps dtype and shape for every "
          "dtype") {
  auto t = GENERATE(dtype::float16, dtype::bfloat16, dtype::float32,
                    dtype::float64, dtype::int32, dtype::int64);
  CAPTURE(to_string(t));
  std::vector<tensor> values{make(t, {2, 2}, {1, 2, 3, 4}),
                             make(t, {2, 2}, {10, 20, 30, 40})};
  for (auto op : {reduce_op::sum, reduce_op::min, reduce_op::max,
                  reduce_op::prod}) {
    auto out = ok(reduce_values(op, values));
    CHECK(out.type() == t);
    CHECK(out.shape() == tensor_shape{2, 2});
  }
  CHECK(values_of(ok(reduce_values(reduce_op::sum, values)))
        == dv{11, 22, 33, 44});
  CHECK(values_of(ok(reduce_values(reduce_op::prod, values)))
        == dv{10, 40, 90, 160});
}

TEST_CASE("distributed reduce: integer mean yields float64 computed in "
          "double") {
  auto t = GENERATE(dtype::int32, dtype::int64);
  CAPTURE(to_string(t));
  std::vector<tensor> values{make(t, {3}, {1, 2, -7}), make(t, {3}, {2, 3, 0}),
                             make(t, {3}, {2, 3, 0})};
  auto mean = ok(reduce_values(reduce_op::mean, values));
  CHECK(mean.type() == dtype::float64);
  CHECK(mean.shape() == tensor_shape{3});
  CHECK(values_of(mean) == dv{5.0 / 3.0, 8.0 / 3.0, -7.0 / 3.0});
  // sum, min, max and prod of integers stay integers.
  CHECK(ok(reduce_values(reduce_op::sum, values)).type() == t);
  CHECK(ok(reduce_values(reduce_op::max, values)).type() == t);
}

TEST_CASE("distributed reduce: integer mean of large int64 values does not "
          "overflow") {
  const double big = 4e18; // two of them overflow int64 when summed
  std::vector<tensor> values{make(dtype::int64, {1}, {big}),
                             make(dtype::int64, {1}, {big})};
  auto mean = ok(reduce_values(reduce_op::mean, values));
  CHECK(mean.type() == dtype::float64);
  CHECK(mean.as_double(0) == big);
}

TEST_CASE("distributed reduce: floating mean keeps the floating dtype") {
  auto t = GENERATE(dtype::float16, dtype::bfloat16, dtype::float32,
                    dtype::float64);
  CAPTURE(to_string(t));
  std::vector<tensor> values{make(t, {2}, {1, 2}), make(t, {2}, {2, 5})};
  auto mean = ok(reduce_values(reduce_op::mean, values));
  CHECK(mean.type() == t);
  CHECK(values_of(mean) == dv{1.5, 3.5});
}

TEST_CASE("distributed reduce: reduce_values works for scalars and a single "
          "replica and shares nothing with its inputs") {
  std::vector<tensor> scalars{tensor::scalar<int64_t>(3),
                              tensor::scalar<int64_t>(-5)};
  auto sum = ok(reduce_values(reduce_op::sum, scalars));
  CHECK(sum.shape() == tensor_shape{});
  CHECK(sum.as_double() == -2);

  std::vector<tensor> one{f32({2}, {1.5, -2})};
  auto copy = ok(reduce_values(reduce_op::sum, one));
  CHECK(copy.bitwise_equal(one[0]));
  CHECK_FALSE(copy.shares_buffer_with(one[0]));
  auto mean = ok(reduce_values(reduce_op::mean, one));
  CHECK(mean.bitwise_equal(one[0]));

  std::vector<tensor> empty_tensors{f32({0}, {}), f32({0}, {})};
  auto nothing = ok(reduce_values(reduce_op::max, empty_tensors));
  CHECK(nothing.shape() == tensor_shape{0});
}

TEST_CASE("distributed reduce: reduce_values rejects an empty span") {
  auto err = failed(reduce_values(reduce_op::sum, {}));
  CHECK(has_code(err, errc::invalid_argument));
  CHECK(message_of(err)
        == "reduce: expected at least one replica value, found none");
}

TEST_CASE("distributed reduce: reduce_values reports a dtype mismatch with "
          "the replica and both dtypes") {
  std::vector<tensor> values{f32({2}, {1, 2}), f32({2}, {1, 2}),
                             i32({2}, {1, 2})};
  auto err = failed(reduce_values(reduce_op::sum, values));
  CHECK(has_code(err, errc::dtype_mismatch));
  CHECK(message_of(err)
        == "reduce: replica 2 has dtype int32 but replica 0 has dtype "
           "float32");
}

TEST_CASE("distributed reduce: reduce_values reports a shape mismatch with "
          "the replica and both shapes") {
  std::vector<tensor> values{f32({4}, {1, 2, 3, 4}), f32({4}, {1, 2, 3, 4}),
                             f32({3}, {1, 2, 3})};
  auto err = failed(reduce_values(reduce_op::sum, values));
  CHECK(has_code(err, errc::shape_mismatch));
  CHECK(message_of(err)
        == "reduce: replica 2 has shape [3] but replica 0 has shape [4]");

  std::vector<tensor> ranks{f32({2, 2}, {1, 2, 3, 4}), f32({4}, {1, 2, 3, 4})};
  auto err2 = failed(reduce_values(reduce_op::mean, ranks));
  CHECK(has_code(err2, errc::shape_mismatch));
  CHECK(message_of(err2)
        == "reduce: replica 1 has shape [4] but replica 0 has shape [2, 2]");
}

// -- reduce along an axis (D4) -----------------------------------------------

TEST_CASE("distributed reduce: mean along an axis is the exact global mean "
          "over uneven batches") {
  std::vector<tensor> values{f32({3}, {1, 2, 3}), f32({1}, {10})};
  auto mean = ok(reduce_values(reduce_op::mean, values, 0));
  CHECK(mean.type() == dtype::float32);
  CHECK(mean.shape() == tensor_shape{});
  CHECK(mean.as_double() == 4.0);
  // A per-replica mean of means would give (2 + 10) / 2 = 6 instead.

  std::vector<tensor> ints{i32({3}, {1, 2, 3}), i32({1}, {10})};
  auto int_mean = ok(reduce_values(reduce_op::mean, ints, 0));
  CHECK(int_mean.type() == dtype::float64);
  CHECK(int_mean.as_double() == 4.0);
}

TEST_CASE("distributed reduce: reduce along axis 0 of a batch keeps the "
          "feature dimensions") {
  // Replica 0: batch of 2, replica 1: batch of 1; 3 features each.
  std::vector<tensor> values{f32({2, 3}, {1, 2, 3, 4, 5, 6}),
                             f32({1, 3}, {7, 8, -9})};
  auto sum = ok(reduce_values(reduce_op::sum, values, 0));
  CHECK(sum.shape() == tensor_shape{3});
  CHECK(values_of(sum) == dv{12, 15, 0});
  CHECK(values_of(ok(reduce_values(reduce_op::mean, values, 0)))
        == dv{4, 5, 0});
  CHECK(values_of(ok(reduce_values(reduce_op::min, values, 0)))
        == dv{1, 2, -9});
  CHECK(values_of(ok(reduce_values(reduce_op::max, values, 0)))
        == dv{7, 8, 6});
  CHECK(values_of(ok(reduce_values(reduce_op::prod, values, 0)))
        == dv{28, 80, -162});
  // Negative axes count from the end.
  CHECK(ok(reduce_values(reduce_op::sum, values, -2)).bitwise_equal(sum));
}

TEST_CASE("distributed reduce: reduce along an inner axis") {
  std::vector<tensor> values{i32({2, 3}, {1, 2, 3, 4, 5, 6}),
                             i32({2, 2}, {10, 20, 30, 40})};
  auto sum = ok(reduce_values(reduce_op::sum, values, 1));
  CHECK(sum.type() == dtype::int32);
  CHECK(sum.shape() == tensor_shape{2});
  CHECK(values_of(sum) == dv{36, 85});
  CHECK(ok(reduce_values(reduce_op::sum, values, -1)).bitwise_equal(sum));
  auto mean = ok(reduce_values(reduce_op::mean, values, 1));
  CHECK(mean.type() == dtype::float64);
  CHECK(values_of(mean) == dv{36.0 / 5, 85.0 / 5});
  CHECK(values_of(ok(reduce_values(reduce_op::max, values, 1))) == dv{20, 40});
  CHECK(values_of(ok(reduce_values(reduce_op::min, values, 1))) == dv{1, 4});
}

TEST_CASE("distributed reduce: reduce along the middle axis of rank-3 "
          "values") {
  // shape [2, k, 2] with k = 2 on replica 0 and k = 3 on replica 1.
  std::vector<tensor> values{
    make(dtype::float64, {2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8}),
    make(dtype::float64, {2, 3, 2},
         {10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 110, 120})};
  auto sum = ok(reduce_values(reduce_op::sum, values, 1));
  CHECK(sum.shape() == tensor_shape{2, 2});
  // out[o][i] = sum over replica 0 rows + replica 1 rows.
  CHECK(values_of(sum) == dv{1 + 3 + 10 + 30 + 50, 2 + 4 + 20 + 40 + 60,
                             5 + 7 + 70 + 90 + 110, 6 + 8 + 80 + 100 + 120});
  auto mean = ok(reduce_values(reduce_op::mean, values, 1));
  CHECK(values_of(mean) == dv{94.0 / 5, 126.0 / 5, 282.0 / 5, 314.0 / 5});
}

TEST_CASE("distributed reduce: integer sums along an axis that overflow "
          "fail and min/max stay exact") {
  const double max32 = std::numeric_limits<int32_t>::max();
  std::vector<tensor> values{i32({2}, {max32, 1}), i32({1}, {1})};
  auto err = failed(reduce_values(reduce_op::sum, values, 0));
  CHECK(has_code(err, errc::overflow));
  CHECK_THAT(message_of(err), Catch::Contains("int32"));
  // Exact in int64: an intermediate outside int32 that comes back is fine.
  std::vector<tensor> back{i32({2}, {max32, 1}), i32({1}, {-5})};
  CHECK(ok(reduce_values(reduce_op::sum, back, 0)).as_double() == max32 - 4);
  const auto big = std::numeric_limits<int64_t>::max();
  auto t = tensor::from_vector<int64_t>({2}, {big, big - 1});
  std::vector<tensor> wide{t};
  auto mx = ok(reduce_values(reduce_op::max, wide, 0));
  auto mn = ok(reduce_values(reduce_op::min, wide, 0));
  CHECK(*mx.data<int64_t>() == big);
  CHECK(*mn.data<int64_t>() == big - 1);
}

TEST_CASE("distributed reduce: reduce along an axis with no elements") {
  std::vector<tensor> values{f32({0, 2}, {}), f32({0, 2}, {})};
  auto sum = ok(reduce_values(reduce_op::sum, values, 0));
  CHECK(sum.shape() == tensor_shape{2});
  CHECK(values_of(sum) == dv{0, 0});
  CHECK(values_of(ok(reduce_values(reduce_op::prod, values, 0))) == dv{1, 1});
  for (auto op : {reduce_op::mean, reduce_op::min, reduce_op::max}) {
    CAPTURE(to_string(op));
    auto err = failed(reduce_values(op, values, 0));
    CHECK(has_code(err, errc::invalid_argument));
    CHECK_THAT(message_of(err), Catch::Contains("axis 0")
                                  && Catch::Contains("is 0"));
  }
  // Integer mean fails the same way; integer sum gives integer zeros.
  std::vector<tensor> ints{i32({0}, {})};
  CHECK(has_code(failed(reduce_values(reduce_op::mean, ints, 0)),
                 errc::invalid_argument));
  auto isum = ok(reduce_values(reduce_op::sum, ints, 0));
  CHECK(isum.type() == dtype::int32);
  CHECK(isum.as_double() == 0);
}

TEST_CASE("distributed reduce: reduce along an axis rejects an axis out of "
          "range") {
  std::vector<tensor> values{f32({2, 3}, {1, 2, 3, 4, 5, 6})};
  auto err = failed(reduce_values(reduce_op::sum, values, 2));
  CHECK(has_code(err, errc::invalid_argument));
  CHECK(message_of(err)
        == "reduce: axis 2 is out of range for values of rank 2 (expected "
           "-2 <= axis < 2)");
  auto err2 = failed(reduce_values(reduce_op::sum, values, -3));
  CHECK(has_code(err2, errc::invalid_argument));
  CHECK_THAT(message_of(err2),
             Catch::Contains("axis -3") && Catch::Contains("rank 2"));
}

TEST_CASE("distributed reduce: reduce along an axis rejects rank-0 values") {
  std::vector<tensor> scalars{tensor::scalar<float>(1.0f),
                              tensor::scalar<float>(2.0f)};
  auto axis = GENERATE(int64_t{0}, int64_t{-1}, int64_t{1});
  CAPTURE(axis);
  auto err = failed(reduce_values(reduce_op::sum, scalars, axis));
  CHECK(has_code(err, errc::invalid_argument));
  CHECK_THAT(message_of(err), Catch::Contains("axis " + std::to_string(axis))
                                && Catch::Contains("rank 0"));
}

TEST_CASE("distributed reduce: reduce along an axis checks replicas") {
  SECTION("empty span") {
    auto err = failed(reduce_values(reduce_op::sum, {}, 0));
    CHECK(has_code(err, errc::invalid_argument));
  }
  SECTION("dtype mismatch") {
    std::vector<tensor> values{f32({2}, {1, 2}),
                               make(dtype::float64, {2}, {1, 2})};
    auto err = failed(reduce_values(reduce_op::sum, values, 0));
    CHECK(has_code(err, errc::dtype_mismatch));
    CHECK(message_of(err)
          == "reduce: replica 1 has dtype float64 but replica 0 has dtype "
             "float32");
  }
  SECTION("shape mismatch outside the axis") {
    std::vector<tensor> values{f32({2, 3}, {1, 2, 3, 4, 5, 6}),
                               f32({2, 2}, {1, 2, 3, 4})};
    auto err = failed(reduce_values(reduce_op::sum, values, 0));
    CHECK(has_code(err, errc::shape_mismatch));
    CHECK(message_of(err)
          == "reduce: replica 1 has shape [2, 2] but replica 0 has shape "
             "[2, 3]; shapes must agree on every dimension except axis 0");
  }
  SECTION("rank mismatch") {
    std::vector<tensor> values{f32({2, 3}, {1, 2, 3, 4, 5, 6}),
                               f32({6}, {1, 2, 3, 4, 5, 6})};
    auto err = failed(reduce_values(reduce_op::sum, values, 0));
    CHECK(has_code(err, errc::shape_mismatch));
    CHECK(message_of(err)
          == "reduce: replica 1 has shape [6] of rank 1 but replica 0 has "
             "shape [2, 3] of rank 2");
  }
}

// -- gather (D7) -------------------------------------------------------------

TEST_CASE("distributed reduce: gather_values concatenates along axis 0 in "
          "replica order") {
  std::vector<tensor> values{f32({2}, {1, 2}), f32({3}, {3, 4, 5}),
                             f32({0}, {}), f32({1}, {6})};
  auto out = ok(gather_values(values, 0));
  CHECK(out.type() == dtype::float32);
  CHECK(out.shape() == tensor_shape{6});
  CHECK(values_of(out) == dv{1, 2, 3, 4, 5, 6});
  CHECK(ok(gather_values(values, -1)).bitwise_equal(out));
}

TEST_CASE("distributed reduce: gather_values concatenates along an inner "
          "axis") {
  std::vector<tensor> values{
    make(dtype::int64, {2, 2}, {1, 2, 3, 4}),
    make(dtype::int64, {2, 1}, {9, 8}),
  };
  auto out = ok(gather_values(values, 1));
  CHECK(out.type() == dtype::int64);
  CHECK(out.shape() == tensor_shape{2, 3});
  CHECK(values_of(out) == dv{1, 2, 9, 3, 4, 8});
  CHECK(ok(gather_values(values, -1)).bitwise_equal(out));

  std::vector<tensor> rows{make(dtype::float16, {1, 2}, {1, 2}),
                           make(dtype::float16, {2, 2}, {3, 4, 5, 6})};
  auto stacked = ok(gather_values(rows, 0));
  CHECK(stacked.type() == dtype::float16);
  CHECK(stacked.shape() == tensor_shape{3, 2});
  CHECK(values_of(stacked) == dv{1, 2, 3, 4, 5, 6});
}

TEST_CASE("distributed reduce: gather_values of one replica is a copy") {
  std::vector<tensor> one{f32({2, 2}, {1, 2, 3, 4})};
  auto out = ok(gather_values(one, 1));
  CHECK(out.bitwise_equal(one[0]));
  CHECK_FALSE(out.shares_buffer_with(one[0]));
}

TEST_CASE("distributed reduce: gather_values rejects bad requests") {
  SECTION("empty span") {
    auto err = failed(gather_values({}, 0));
    CHECK(has_code(err, errc::invalid_argument));
    CHECK(message_of(err)
          == "gather: expected at least one replica value, found none");
  }
  SECTION("rank-0 values") {
    std::vector<tensor> scalars{tensor::scalar<float>(1.0f),
                                tensor::scalar<float>(2.0f)};
    auto err = failed(gather_values(scalars, 0));
    CHECK(has_code(err, errc::invalid_argument));
    CHECK_THAT(message_of(err), Catch::Contains("rank 0"));
  }
  SECTION("axis out of range") {
    std::vector<tensor> values{f32({2}, {1, 2}), f32({1}, {3})};
    auto err = failed(gather_values(values, 1));
    CHECK(has_code(err, errc::invalid_argument));
    CHECK(message_of(err)
          == "gather: axis 1 is out of range for values of rank 1 (expected "
             "-1 <= axis < 1)");
    CHECK(has_code(failed(gather_values(values, -2)),
                   errc::invalid_argument));
  }
  SECTION("shape mismatch outside the axis") {
    std::vector<tensor> values{f32({2, 2}, {1, 2, 3, 4}),
                               f32({2, 3}, {1, 2, 3, 4, 5, 6})};
    auto err = failed(gather_values(values, 0));
    CHECK(has_code(err, errc::shape_mismatch));
    CHECK(message_of(err)
          == "gather: replica 1 has shape [2, 3] but replica 0 has shape "
             "[2, 2]; shapes must agree on every dimension except axis 0");
  }
  SECTION("rank mismatch") {
    std::vector<tensor> values{f32({2, 2}, {1, 2, 3, 4}),
                               f32({4}, {1, 2, 3, 4})};
    auto err = failed(gather_values(values, 0));
    CHECK(has_code(err, errc::shape_mismatch));
  }
  SECTION("dtype mismatch") {
    std::vector<tensor> values{f32({2}, {1, 2}), f32({2}, {1, 2}),
                               make(dtype::bfloat16, {2}, {1, 2})};
    auto err = failed(gather_values(values, 0));
    CHECK(has_code(err, errc::dtype_mismatch));
    CHECK(message_of(err)
          == "gather: replica 2 has dtype bfloat16 but replica 0 has dtype "
             "float32");
  }
}

TEST_CASE("distributed reduce: integer sums and products that do not fit the "
          "dtype fail with overflow") {
  const double max32 = std::numeric_limits<int32_t>::max();
  std::vector<tensor> values{i32({2}, {max32, 1}), i32({2}, {1, 1})};
  auto err = failed(reduce_values(reduce_op::sum, values));
  CHECK(has_code(err, errc::overflow));
  CHECK_THAT(message_of(err), Catch::Contains("element 0"));
  CHECK(to_string(errc::overflow) == "overflow");
  CHECK_THAT(describe(err), Catch::StartsWith("overflow: "));
  auto big = std::numeric_limits<int64_t>::max();
  std::vector<tensor> wide{tensor::from_vector<int64_t>({1}, {big}),
                           tensor::from_vector<int64_t>({1}, {1})};
  CHECK(has_code(failed(reduce_values(reduce_op::sum, wide)), errc::overflow));
  std::vector<tensor> prod{tensor::from_vector<int64_t>({1}, {big / 2 + 1}),
                           tensor::from_vector<int64_t>({1}, {2})};
  CHECK(has_code(failed(reduce_values(reduce_op::prod, prod)),
                 errc::overflow));
  // In range: exact.
  std::vector<tensor> fine{i32({2}, {max32 - 1, -3}), i32({2}, {1, 3})};
  CHECK(values_of(ok(reduce_values(reduce_op::sum, fine))) == dv{max32, 0});
}
