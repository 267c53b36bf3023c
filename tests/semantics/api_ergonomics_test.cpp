// The conveniences of the public API: read_scalar (blocking and async) and
// lambdas for the async run.

#include "fixture.hpp"

#include <cmath>
#include <future>

using namespace vs_test;

namespace {

/// Starts an async operation and waits for what its callback gets.
template <class T, class Start>
caf::expected<T> wait_for(Start start) {
  auto p = std::make_shared<std::promise<caf::expected<T>>>();
  auto f = p->get_future();
  start([p](caf::expected<T> x) { p->set_value(std::move(x)); });
  if (f.wait_for(30s) != std::future_status::ready)
    FAIL("the async callback was not called within 30 s");
  return f.get();
}

/// The same for operations that call back with a caf::error.
template <class Start>
caf::error wait_done(Start start) {
  auto p = std::make_shared<std::promise<caf::error>>();
  auto f = p->get_future();
  start([p](caf::error err) { p->set_value(std::move(err)); });
  if (f.wait_for(30s) != std::future_status::ready)
    FAIL("the async callback was not called within 30 s");
  return f.get();
}

} // namespace

// -- read_scalar --------------------------------------------------------------------

TEST_CASE("read_scalar: the cross-replica value of a one-element variable as "
          "its own dtype or converted without loss") {
  auto s = make_strategy(3);
  auto loss = make_var(s, "loss", tensor::scalar<float>(0),
                       synchronization::on_read, aggregation::mean);
  auto seen = make_var(s, "seen", tensor::scalar<int64_t>(0),
                       synchronization::on_read, aggregation::sum);
  VS_REQUIRE_OK(s.run([&](replica_context& ctx) {
    VS_STEP_OK(ctx.assign(loss, 1.5 * (ctx.replica_id() + 1)));
    VS_STEP_OK(ctx.assign_add(seen, 10.0));
  }));
  // Mean of 1.5, 3, 4.5 and the sum 30.
  CHECK(VS_VALUE(s.read_scalar<float>(loss)) == 3.0f);
  CHECK(VS_VALUE(s.read_scalar<double>(loss)) == 3.0);
  CHECK(VS_VALUE(s.read_scalar<int32_t>(loss)) == 3);
  CHECK(VS_VALUE(s.read_scalar<int64_t>(seen)) == 30);
  CHECK(VS_VALUE(s.read_scalar<double>(seen)) == 30.0);
  CHECK(VS_VALUE(s.read_scalar<float>(seen)) == 30.0f);
}

TEST_CASE("read_scalar: a value that T cannot hold exactly is a dtype_mismatch "
          "naming the variable, the value and both dtypes") {
  auto s = make_strategy(2);
  auto w = make_var(s, "w", tensor::scalar<double>(2.5),
                    synchronization::on_write, aggregation::mean);
  auto r = s.read_scalar<int32_t>(w);
  REQUIRE_FALSE(r);
  VS_CHECK_CODE(r.error(), dtype_mismatch);
  auto text = message_of(r.error());
  CHECK(text.find("'w'") != std::string::npos);
  CHECK(text.find("2.5") != std::string::npos);
  CHECK(text.find("float64") != std::string::npos);
  CHECK(text.find("int32") != std::string::npos);
  // float64 0.1 is not a float32 value.
  VS_REQUIRE_OK(s.assign(w, 0.1));
  VS_CHECK_CODE(error_of(s.read_scalar<float>(w)), dtype_mismatch);
  // Out of int32's range.
  VS_REQUIRE_OK(s.assign(w, 3e9));
  VS_CHECK_CODE(error_of(s.read_scalar<int32_t>(w)), dtype_mismatch);
  CHECK(VS_VALUE(s.read_scalar<int64_t>(w)) == 3000000000);
  // int64 values a double rounds.
  auto big = make_var(s, "big",
                      tensor::scalar<int64_t>((int64_t{1} << 53) + 1),
                      synchronization::on_write, aggregation::only_first_replica);
  VS_CHECK_CODE(error_of(s.read_scalar<double>(big)), dtype_mismatch);
  CHECK(VS_VALUE(s.read_scalar<int64_t>(big)) == (int64_t{1} << 53) + 1);
}

TEST_CASE("read_scalar: a variable without exactly one element is a "
          "shape_mismatch, and an empty handle is invalid_argument") {
  auto s = make_strategy(2);
  auto w = make_var(s, "w", tensor::zeros(dtype::float32, {2}),
                    synchronization::on_write, aggregation::mean);
  auto r = s.read_scalar<float>(w);
  REQUIRE_FALSE(r);
  VS_CHECK_CODE(r.error(), shape_mismatch);
  CHECK(message_of(r.error()).find("'w'") != std::string::npos);
  CHECK(message_of(r.error()).find("[2]") != std::string::npos);
  VS_CHECK_CODE(error_of(s.read_scalar<float>(variable{})), invalid_argument);
}

TEST_CASE("async read_scalar: the same value and the same errors as the "
          "blocking read_scalar") {
  auto s = make_strategy(2);
  auto api = s.async();
  auto w = make_var(s, "w", tensor::scalar<float>(4.0f),
                    synchronization::on_write, aggregation::mean);
  auto v = wait_for<float>(
    [&](auto done) { api.read_scalar<float>(w, std::move(done)); });
  REQUIRE(v);
  CHECK(*v == 4.0f);
  auto i = wait_for<int64_t>(
    [&](auto done) { api.read_scalar<int64_t>(w, std::move(done)); });
  REQUIRE(i);
  CHECK(*i == 4);
  VS_REQUIRE_OK(s.assign(w, 0.5));
  auto bad = wait_for<int32_t>(
    [&](auto done) { api.read_scalar<int32_t>(w, std::move(done)); });
  REQUIRE_FALSE(bad);
  VS_CHECK_CODE(bad.error(), dtype_mismatch);
  auto none = wait_for<float>(
    [&](auto done) { api.read_scalar<float>(variable{}, std::move(done)); });
  REQUIRE_FALSE(none);
  VS_CHECK_CODE(none.error(), invalid_argument);
}

// -- lambdas for the async run ------------------------------------------------------

TEST_CASE("async run: a lambda returning a value gives the per-replica "
          "results to the callback") {
  auto s = make_strategy(3);
  auto w = make_var(s, "w", tensor::scalar<double>(0),
                    synchronization::on_write, aggregation::sum);
  auto r = wait_for<per_replica<int>>([&](auto done) {
    s.async().run(
      [w](replica_context& ctx) {
        VS_STEP_OK(ctx.assign_add(w, 1.0));
        return ctx.replica_id() * 10;
      },
      std::move(done));
  });
  REQUIRE(r);
  CHECK(r->values() == std::vector<int>{0, 10, 20});
  CHECK(read_scalar(s, w) == 3.0);
}

TEST_CASE("async run: a void lambda applies its updates and calls back "
          "without error") {
  auto s = make_strategy(2);
  auto w = make_var(s, "w", tensor::scalar<float>(1),
                    synchronization::on_write, aggregation::mean);
  auto err = wait_done([&](done_callback done) {
    s.async().run(
      [w](replica_context& ctx) {
        VS_STEP_OK(ctx.assign_add(w, double(ctx.replica_id() + 1)));
      },
      std::move(done));
  });
  VS_REQUIRE_OK(err);
  CHECK(read_scalar(s, w) == 2.5); // 1 + mean(1, 2)
}

TEST_CASE("async run: a lambda step that fails gives the error and no "
          "results") {
  auto s = make_strategy(2, 20s, on_step_exception::fail_step);
  auto r = wait_for<per_replica<int>>([&](auto done) {
    s.async().run(
      [](replica_context& ctx) -> int {
        if (ctx.replica_id() == 1)
          throw std::runtime_error("boom");
        return 1;
      },
      std::move(done));
  });
  REQUIRE_FALSE(r);
  VS_CHECK_CODE(r.error(), replica_failed);
}

TEST_CASE("run: the blocking API also takes a hand-written step") {
  auto s = make_strategy(2);
  auto made = make_step([](replica_context& ctx) { return ctx.replica_id(); },
                        s.num_replicas());
  VS_REQUIRE_OK(s.run(made.step));
  CHECK(made.results->take().values() == std::vector<int>{0, 1});
}
