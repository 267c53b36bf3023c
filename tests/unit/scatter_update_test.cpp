// Sparse updates without actors: the row kernels, the rules that combine
// duplicate rows and the replicas' contributions (S1, S5), and scatter items
// in plans (they serialize, refuse inconsistent bytes, and the one-pass
// algorithm applies them slice by slice).

#include <catch2/catch.hpp>

#include <cstdint>
#include <limits>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/binary_deserializer.hpp>
#include <caf/binary_serializer.hpp>

#include "core/half.hpp"
#include "devices/host_kernels.hpp"
#include "sync/collectives/collective_buffers.hpp"
#include "sync/collectives/one_pass_shared_memory.hpp"
#include "sync/collectives/scatter_items.hpp"
#include "sync/scatter_update.hpp"
#include "varsync/error.hpp"
#include "varsync/dtype.hpp"

using namespace varsync;

namespace {

variable_info table(dtype t, tensor_shape shape,
                    aggregation agg = aggregation::sum) {
  variable_info info;
  info.id = 1;
  info.name = "tab";
  info.type = t;
  info.shape = std::move(shape);
  info.sync = synchronization::on_write;
  info.agg = agg;
  return info;
}

} // namespace

TEST_CASE("scatter kernels: rows of every op land where the indices say, "
          "split across workers anywhere") {
  const std::vector<int64_t> rows{3, 0};
  const std::vector<float> y{1, 2, 3, 4, 5, 6}; // rows of 3
  for (auto op : {scatter_op::update, scatter_op::add, scatter_op::sub,
                  scatter_op::mul, scatter_op::div, scatter_op::min,
                  scatter_op::max}) {
    INFO(to_string(op));
    std::vector<float> whole(12, 2), sliced(12, 2);
    host::scatter_apply(op, dtype::float32, whole.data(), 3, rows, y.data(), 0,
                        6);
    // Slices that cut rows in the middle give the same result.
    host::scatter_apply(op, dtype::float32, sliced.data(), 3, rows, y.data(), 0,
                        2);
    host::scatter_apply(op, dtype::float32, sliced.data(), 3, rows, y.data(), 2,
                        5);
    host::scatter_apply(op, dtype::float32, sliced.data(), 3, rows, y.data(), 5,
                        6);
    CHECK(whole == sliced);
    for (int i = 3; i < 9; ++i) // rows 1 and 2 untouched
      CHECK(whole[static_cast<size_t>(i)] == 2);
  }
  std::vector<float> c(12, 2);
  host::scatter_apply(scatter_op::sub, dtype::float32, c.data(), 3, rows,
                      y.data(), 0, 6);
  CHECK(c == std::vector<float>{-2, -3, -4, 2, 2, 2, 2, 2, 2, 1, 0, -1});
  SECTION("16-bit floats compute through float") {
    std::vector<uint16_t> h(4, float_to_float16(1.5f));
    std::vector<uint16_t> v{float_to_float16(2.0f)};
    std::vector<int64_t> one{2};
    host::scatter_apply(scatter_op::mul, dtype::float16, h.data(), 1, one,
                        v.data(), 0, 1);
    CHECK(float16_to_float(h[2]) == 3.0f);
    CHECK(float16_to_float(h[1]) == 1.5f);
  }
}

TEST_CASE("scatter kernels: integer overflow and zero divisors are found "
          "before anything is written") {
  std::vector<int32_t> c{std::numeric_limits<int32_t>::max(), 5,
                         std::numeric_limits<int32_t>::min(), 7};
  std::vector<int64_t> rows{1, 0};
  std::vector<int32_t> one{1, 1};
  CHECK(host::scatter_first_overflow(scatter_op::add, dtype::int32, c.data(), 1,
                                     rows, one.data(), 0, 2)
        == 1); // row 0 = max + 1
  CHECK(host::scatter_first_overflow(scatter_op::sub, dtype::int32, c.data(), 1,
                                     rows, one.data(), 0, 2)
        == -1);
  std::vector<int64_t> min_row{2};
  std::vector<int32_t> minus_one{-1};
  CHECK(host::scatter_first_overflow(scatter_op::div, dtype::int32, c.data(), 1,
                                     min_row, minus_one.data(), 0, 1)
        == 0);
  CHECK(host::scatter_first_overflow(scatter_op::mul, dtype::int32, c.data(), 1,
                                     min_row, minus_one.data(), 0, 1)
        == 0);
  std::vector<int64_t> zeros{3, 0, 9};
  CHECK(host::first_zero(dtype::int64, zeros.data(), 0, 3) == 1);
  std::vector<double> fz{0.0};
  CHECK(host::first_zero(dtype::float64, fz.data(), 0, 1) == -1);
}

TEST_CASE("scatter rules: duplicate rows of one contribution combine by the "
          "op, and the result is sorted and distinct") {
  auto info = table(dtype::int64, {5, 2});
  std::vector<int64_t> idx{4, 1, 4};
  auto vals = tensor::from_vector<int64_t>({3, 2}, {1, 2, 3, 4, 5, 6});
  auto add = combine_duplicate_rows(info, scatter_op::add, idx, vals);
  REQUIRE(add);
  CHECK(add->rows == std::vector<int64_t>{1, 4});
  CHECK(add->values.to_vector<int64_t>() == std::vector<int64_t>{3, 4, 6, 8});
  CHECK(add->values.shape() == tensor_shape{2, 2});
  auto upd = combine_duplicate_rows(info, scatter_op::update, idx, vals);
  REQUIRE(upd);
  CHECK(upd->values.to_vector<int64_t>() == std::vector<int64_t>{3, 4, 5, 6});
  auto big = tensor::from_vector<int64_t>(
    {2, 2}, {std::numeric_limits<int64_t>::max(), 0, 1, 0});
  auto over = combine_duplicate_rows(info, scatter_op::add, {2, 2}, big);
  REQUIRE_FALSE(over);
  CHECK(has_code(over.error(), errc::overflow));
  CHECK(message_of(over.error()).find("row 2") != std::string::npos);
}

TEST_CASE("scatter rules: scatter_mul and scatter_div keep a repeated "
          "row's factors in order, applied one after another (S5)",
          "[issue34]") {
  // Their product leaves the dtype although each step stays inside it.
  auto info = table(dtype::float32, {3});
  std::vector<int64_t> idx{2, 0, 2};
  auto vals = tensor::from_vector<float>({3}, {1e25f, 3, 1e25f});
  auto div = combine_duplicate_rows(info, scatter_op::div, idx, vals);
  REQUIRE(div);
  CHECK(div->rows == std::vector<int64_t>{0, 2, 2});
  CHECK(div->values.to_vector<float>() == std::vector<float>{3, 1e25f, 1e25f});
  CHECK(rows_in_kernel_form(scatter_op::div, div->rows));
  CHECK_FALSE(rows_in_kernel_form(scatter_op::add, div->rows));
  std::vector<float> c{6, 1, 1e30f};
  host::scatter_apply(scatter_op::div, dtype::float32, c.data(), 1, div->rows,
                      div->values.raw(), 0, 3);
  CHECK(c[0] == 2);
  CHECK(c[2] == Approx(1e-20f).epsilon(1e-6));
  SECTION("int32: 0 * 65536 * 65536 and 5 / 65536 / 65536 are 0, where "
          "combining the factors first overflowed") {
    auto ints = table(dtype::int32, {2});
    auto f = tensor::from_vector<int32_t>({2}, {65536, 65536});
    for (auto op : {scatter_op::mul, scatter_op::div}) {
      auto rows = combine_duplicate_rows(ints, op, {1, 1}, f);
      REQUIRE(rows);
      std::vector<int32_t> comp{7, op == scatter_op::mul ? 0 : 5};
      CHECK(host::scatter_first_overflow(op, dtype::int32, comp.data(), 1,
                                         rows->rows, rows->values.raw(), 0, 2)
            == -1);
      host::scatter_apply(op, dtype::int32, comp.data(), 1, rows->rows,
                          rows->values.raw(), 0, 2);
      CHECK(comp == std::vector<int32_t>{7, 0});
      // A step that leaves the dtype is still found, at that occurrence.
      std::vector<int32_t> one{7, 1};
      CHECK(host::scatter_first_overflow(scatter_op::mul, dtype::int32,
                                         one.data(), 1, rows->rows,
                                         rows->values.raw(), 0, 2)
            == 1);
    }
  }
  SECTION("summed over replicas, a part's repeated rows combine into their "
          "product first") {
    std::vector<scatter_rows> parts{
      {{1, 1}, tensor::from_vector<float>({2}, {2, 3})},
      {{1}, tensor::from_vector<float>({1}, {4})},
    };
    auto sum = combine_scatter_contributions(info, scatter_op::mul,
                                             {reduce_op::sum, false, false},
                                             parts, "'tab'");
    REQUIRE(sum);
    CHECK(sum->rows == std::vector<int64_t>{1});
    CHECK(sum->values.to_vector<float>() == std::vector<float>{10});
    auto first = combine_scatter_contributions(info, scatter_op::mul,
                                               {reduce_op::sum, true, false},
                                               parts, "'tab'");
    REQUIRE(first);
    CHECK(first->rows == std::vector<int64_t>{1, 1});
  }
  SECTION("one worker applies a plan item whose rows repeat") {
    collective_plan plan;
    plan.num_replicas = 1;
    auto rows = combine_duplicate_rows(
      info, scatter_op::mul, std::vector<int64_t>(40, 1),
      tensor::filled(dtype::float32, {40}, 2.0f));
    REQUIRE(rows);
    fill_scatter_item(plan.add_item(), info, scatter_op::mul,
                      std::move(*rows), true, 1);
    std::vector<float> comp{1, 1, 1};
    auto buffers = bind_plan_buffers(plan);
    buffers.items[0].components = {comp.data()};
    auto algo = make_one_pass_shared_memory(3);
    // Workers 1 and 2 hold later elements of the item: they leave it alone.
    for (int w : {2, 1})
      REQUIRE_FALSE(algo->run(plan, buffers, w, 3));
    CHECK(comp == std::vector<float>{1, 1, 1});
    REQUIRE_FALSE(algo->run(plan, buffers, 0, 3));
    CHECK(comp == std::vector<float>{1, 0x1p40f, 1});
  }
}

TEST_CASE("scatter rules: contributions combine row by row (W4)") {
  auto info = table(dtype::float32, {4});
  std::vector<scatter_rows> parts{
    {{0, 2}, tensor::from_vector<float>({2}, {1, 2})},
    {{2, 3}, tensor::from_vector<float>({2}, {4, 8})},
  };
  auto sum = combine_scatter_contributions(info, scatter_op::add,
                                           {reduce_op::sum, false, false},
                                           parts, "'tab'");
  REQUIRE(sum);
  CHECK(sum->rows == std::vector<int64_t>{0, 2, 3});
  CHECK(sum->values.to_vector<float>() == std::vector<float>{1, 6, 8});
  auto mean = combine_scatter_contributions(info, scatter_op::add,
                                            {reduce_op::mean, false, false},
                                            parts, "'tab'");
  REQUIRE(mean);
  CHECK(mean->values.to_vector<float>() == std::vector<float>{0.5f, 3, 4});
  auto first = combine_scatter_contributions(info, scatter_op::add,
                                             {reduce_op::sum, true, false},
                                             parts, "'tab'");
  REQUIRE(first);
  CHECK(first->rows == std::vector<int64_t>{0, 2});
  auto none = combine_scatter_contributions(info, scatter_op::add,
                                            {reduce_op::sum, false, true},
                                            parts, "'tab'");
  REQUIRE_FALSE(none);
  CHECK(has_code(none.error(), errc::aggregation_required));
  SECTION("integer divisors that sum to zero are refused") {
    auto ints = table(dtype::int32, {2});
    std::vector<scatter_rows> divs{
      {{1}, tensor::from_vector<int32_t>({1}, {3})},
      {{1}, tensor::from_vector<int32_t>({1}, {-3})},
    };
    auto y = combine_scatter_contributions(ints, scatter_op::div,
                                           {reduce_op::sum, false, false},
                                           divs, "'tab'");
    REQUIRE_FALSE(y);
    CHECK(has_code(y.error(), errc::invalid_argument));
  }
}

TEST_CASE("scatter items: a plan carries them through serialization, refuses "
          "inconsistent ones, and the one-pass algorithm applies them") {
  auto info = table(dtype::float64, {6, 2});
  collective_plan plan;
  plan.num_replicas = 2;
  fill_scatter_item(plan.add_item(), info, scatter_op::add,
                    {{1, 4}, tensor::from_vector<double>({2, 2}, {1, 2, 3, 4})},
                    true, 2);
  REQUIRE(plan.items[0].count == 4);
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  auto save = [&](const collective_plan& p) {
    std::vector<char> buf;
    caf::binary_serializer sink{sys, buf};
    auto copy = p;
    REQUIRE_FALSE(sink(copy));
    return buf;
  };
  auto load = [&](const std::vector<char>& buf, collective_plan& out) {
    caf::binary_deserializer source{sys, buf.data(), buf.size()};
    return source(out);
  };
  collective_plan back;
  REQUIRE_FALSE(load(save(plan), back));
  REQUIRE(back.items.size() == 1);
  CHECK(back.items[0].scatter);
  CHECK(back.items[0].sop == scatter_op::add);
  CHECK(back.items[0].rows == std::vector<int64_t>{1, 4});
  CHECK(back.items[0].row_elems == 2);
  SECTION("a count that is not rows times row length") {
    auto bad = plan;
    bad.items[0].count = 3;
    collective_plan out;
    CHECK(load(save(bad), out));
  }
  SECTION("rows on an item that is not a scatter") {
    auto bad = plan;
    bad.items[0].scatter = false;
    collective_plan out;
    CHECK(load(save(bad), out));
  }
  SECTION("an op outside the enum") {
    auto bad = plan;
    bad.items[0].sop = static_cast<scatter_op>(7);
    collective_plan out;
    CHECK(load(save(bad), out));
  }
  SECTION("two workers apply it to every component") {
    std::vector<double> c0(12, 10), c1(12, 10);
    auto buffers = bind_plan_buffers(plan);
    buffers.items[0].components = {c0.data(), c1.data()};
    auto algo = make_one_pass_shared_memory(2);
    REQUIRE_FALSE(algo->run(plan, buffers, 0, 2));
    REQUIRE_FALSE(algo->run(plan, buffers, 1, 2));
    std::vector<double> want(12, 10);
    want[2] = 11;
    want[3] = 12;
    want[8] = 13;
    want[9] = 14;
    CHECK(c0 == want);
    CHECK(c1 == want);
  }
}
