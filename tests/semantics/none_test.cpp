#include "fixture.hpp"

using namespace vs_test;

TEST_CASE("N1: replica-context reads and updates touch component r only") {
  auto s = make_strategy(3);
  auto v = make_var(s, "local", tensor::scalar<int32_t>(1),
                    synchronization::none);
  auto seen = VS_VALUE(s.run([&](replica_context& ctx) {
    if (ctx.replica_id() == 1)
      VS_STEP_OK(ctx.assign_add(v, 10.0));
    return VS_VALUE_IN_STEP(ctx.read_copy(v)).as_double(0);
  }));
  CHECK(seen.values() == mine(s, std::vector<double>{1, 11, 1}));
  CHECK(components(s, v) == std::vector<double>{1, 11, 1});
}

TEST_CASE("N2: cross-replica updates apply to every component") {
  auto s = make_strategy(3);
  auto v = make_var(s, "local", tensor::scalar<float>(1),
                    synchronization::none);
  VS_REQUIRE_OK(s.run([&](replica_context& ctx) {
    VS_STEP_OK(ctx.assign(v, 1.0 * ctx.replica_id()));
  }));
  VS_REQUIRE_OK(s.assign_add(v, 5.0));
  CHECK(components(s, v) == std::vector<double>{5, 6, 7});
  VS_REQUIRE_OK(s.assign_sub(v, 1.0));
  CHECK(components(s, v) == std::vector<double>{4, 5, 6});
  VS_REQUIRE_OK(s.assign(v, 9.0));
  CHECK(components(s, v) == std::vector<double>{9, 9, 9});
}

TEST_CASE("N3: a cross-replica read fails with several replicas and returns "
          "the component with one") {
  auto s = make_strategy(2);
  auto v = make_var(s, "local", tensor::scalar<float>(2),
                    synchronization::none);
  auto err = error_of(s.read(v));
  VS_CHECK_CODE(err, no_cross_replica_value);
  CHECK(message_of(err).find("'local'") != std::string::npos);
  auto one = make_strategy(1);
  auto w = make_var(one, "local", tensor::scalar<float>(2),
                    synchronization::none);
  CHECK(read_scalar(one, w) == 2);
}
