#include "fixture.hpp"

#include <cstdint>

using namespace vs_test;

namespace {

// Sets component r of `v` to values[r] with a replica step.
void set_components(const strategy& s, const variable& v,
                    std::vector<double> values) {
  VS_REQUIRE_OK(s.run([&](replica_context& ctx) {
    VS_STEP_OK(ctx.assign(v, values[static_cast<size_t>(ctx.replica_id())]));
  }));
}

} // namespace

TEST_CASE("R1: replica-context updates change only component r, at once") {
  auto s = make_strategy(4);
  auto v = make_var(s, "hits", tensor::scalar<int64_t>(0),
                    synchronization::on_read, aggregation::sum);
  auto stats_before = VS_VALUE(s.stats());
  auto seen = VS_VALUE(s.run([&](replica_context& ctx) {
    VS_STEP_OK(ctx.assign_add(v, ctx.replica_id() + 1.0));
    auto view = ctx.read(v); // visible immediately inside the step
    if (!view)
      throw std::runtime_error(describe(view.error()));
    return view->as<int64_t>()[0];
  }));
  CHECK(seen.values() == mine(s, std::vector<int64_t>{1, 2, 3, 4}));
  // No collective ran for these local updates (across processes every
  // step has its agreement round).
  if (s.num_processes() == 1)
    CHECK(VS_VALUE(s.stats()).collectives_run == stats_before.collectives_run);
  CHECK(components(s, v) == std::vector<double>{1, 2, 3, 4});
  VS_REQUIRE_OK(s.run([&](replica_context& ctx) {
    if (ctx.replica_id() == 2)
      VS_STEP_OK(ctx.assign_sub(v, 3.0));
  }));
  CHECK(components(s, v) == std::vector<double>{1, 2, 0, 4});
}

TEST_CASE("R2: a replica-context read by replica r returns component r") {
  auto s = make_strategy(3);
  auto v = make_var(s, "m", tensor::scalar<float>(0), synchronization::on_read,
                    aggregation::mean);
  set_components(s, v, {5, 6, 7});
  auto seen = VS_VALUE(s.run([&](replica_context& ctx) {
    return VS_VALUE_IN_STEP(ctx.read_copy(v)).as_double(0);
  }));
  CHECK(seen.values() == mine(s, std::vector<double>{5, 6, 7}));
}

TEST_CASE("R3: a cross-replica read aggregates the components") {
  auto s = make_strategy(4);
  auto sum = make_var(s, "sum", tensor::scalar<double>(0),
                      synchronization::on_read, aggregation::sum);
  auto mean = make_var(s, "mean", tensor::scalar<double>(0),
                       synchronization::on_read, aggregation::mean);
  auto first = make_var(s, "first", tensor::scalar<double>(0),
                        synchronization::on_read,
                        aggregation::only_first_replica);
  auto none = make_var(s, "none", tensor::scalar<double>(0),
                       synchronization::on_read, aggregation::none);
  for (auto& v : {sum, mean, first, none})
    set_components(s, v, {1, 2, 3, 10});
  CHECK(read_scalar(s, sum) == 16);
  CHECK(read_scalar(s, mean) == 4);
  CHECK(read_scalar(s, first) == 1);
  auto err = error_of(s.read(none));
  VS_CHECK_CODE(err, no_cross_replica_value);
  CHECK(message_of(err).find("'none'") != std::string::npos);
  // Vectors reduce elementwise.
  auto vec = make_var(s, "vec", tensor::from_vector<float>({2}, {1, -1}),
                      synchronization::on_read, aggregation::sum);
  CHECK(VS_VALUE(s.read(vec)).to_vector<float>() == std::vector<float>{4, -4});
  // Large values take the collective path instead of gathering copies.
  auto big_sum = make_var(s, "big_sum", tensor::filled(dtype::float32, {5000}, 1.5),
                          synchronization::on_read, aggregation::sum);
  auto big_mean = make_var(s, "big_mean",
                           tensor::filled(dtype::float64, {5000}, 0),
                           synchronization::on_read, aggregation::mean);
  VS_REQUIRE_OK(s.run([&](replica_context& ctx) {
    VS_STEP_OK(ctx.assign(big_mean, tensor::filled(dtype::float64, {5000},
                                                   ctx.replica_id())));
  }));
  CHECK(VS_VALUE(s.read(big_sum)).to_vector<float>()
        == std::vector<float>(5000, 6));
  CHECK(VS_VALUE(s.read(big_mean)).to_vector<double>()
        == std::vector<double>(5000, 1.5));
}

TEST_CASE("R4: on_read sum cross-replica assign splits floats evenly") {
  auto s = make_strategy(4);
  auto v = make_var(s, "f", tensor::scalar<float>(0), synchronization::on_read,
                    aggregation::sum);
  VS_REQUIRE_OK(s.assign(v, 10.0));
  CHECK(components(s, v) == std::vector<double>(4, 2.5));
  CHECK(read_scalar(s, v) == 10);
}

TEST_CASE("R4: on_read sum cross-replica assign splits integers exactly "
          "(TF differs)") {
  SECTION("7 over 2 replicas") {
    auto s = make_strategy(2);
    auto v = make_var(s, "i", tensor::scalar<int32_t>(0),
                      synchronization::on_read, aggregation::sum);
    VS_REQUIRE_OK(s.assign(v, 7.0));
    CHECK(components(s, v) == std::vector<double>{4, 3});
    CHECK(read_scalar(s, v) == 7);
  }
  SECTION("10 and -7 over 4 replicas, int64 vectors") {
    auto s = make_strategy(4);
    auto v = make_var(s, "i", tensor::from_vector<int64_t>({2}, {0, 0}),
                      synchronization::on_read, aggregation::sum);
    VS_REQUIRE_OK(s.assign(v, tensor::from_vector<int64_t>({2}, {10, -7})));
    auto values = VS_VALUE(s.all_values(v));
    std::vector<int64_t> first, second;
    for (auto& c : values) {
      first.push_back(c.data<int64_t>()[0]);
      second.push_back(c.data<int64_t>()[1]);
    }
    CHECK(first == std::vector<int64_t>{3, 3, 2, 2});
    CHECK(second == std::vector<int64_t>{-1, -2, -2, -2});
    CHECK(VS_VALUE(s.read(v)).to_vector<int64_t>()
          == std::vector<int64_t>{10, -7});
  }
}

TEST_CASE("R4: other on_read aggregations assign x to every component") {
  auto s = make_strategy(3);
  int k = 0;
  for (auto agg : {aggregation::mean, aggregation::only_first_replica,
                   aggregation::none}) {
    auto v = make_var(s, "v" + std::to_string(k++), tensor::scalar<float>(0),
                      synchronization::on_read, agg);
    VS_REQUIRE_OK(s.assign(v, 6.0));
    CHECK(components(s, v) == std::vector<double>(3, 6));
  }
}

TEST_CASE("R5: on_read sum cross-replica assign_add/assign_sub change the sum "
          "by exactly x (TF differs)") {
  auto s = make_strategy(4);
  auto v = make_var(s, "count", tensor::scalar<int64_t>(0),
                    synchronization::on_read, aggregation::sum);
  set_components(s, v, {1, 2, 3, 4});
  VS_REQUIRE_OK(s.assign_add(v, 5.0));
  CHECK(components(s, v) == std::vector<double>{6, 2, 3, 4});
  CHECK(read_scalar(s, v) == 15);
  VS_REQUIRE_OK(s.assign_sub(v, 3.0));
  CHECK(read_scalar(s, v) == 12);
}

TEST_CASE("R5: other on_read aggregations apply assign_add to every "
          "component") {
  auto s = make_strategy(3);
  int k = 0;
  for (auto agg : {aggregation::mean, aggregation::only_first_replica,
                   aggregation::none}) {
    auto v = make_var(s, "v" + std::to_string(k++), tensor::scalar<float>(1),
                      synchronization::on_read, agg);
    VS_REQUIRE_OK(s.assign_add(v, 2.0));
    CHECK(components(s, v) == std::vector<double>(3, 3));
    VS_REQUIRE_OK(s.assign_sub(v, 1.0));
    CHECK(components(s, v) == std::vector<double>(3, 2));
  }
}
