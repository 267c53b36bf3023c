// The conveniences of the public API: read_scalar, lambdas for the async
// run, and the async counterparts of the blocking operations. Each async
// operation is checked against what the blocking one returns.

#include "fixture.hpp"

#include <cmath>
#include <future>
#include <limits>

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

per_replica<tensor> floats(std::vector<std::vector<float>> rows) {
  std::vector<tensor> values;
  for (auto& row : rows)
    values.push_back(tensor::from_vector<float>(
      {static_cast<int64_t>(row.size())}, row));
  return per_replica<tensor>{std::move(values)};
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
  CHECK(r->values() == mine(s, std::vector<int>{0, 10, 20}));
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
  // Across processes a step's results are this process's replicas'.
  auto made = make_step([](replica_context& ctx) { return ctx.replica_id(); },
                        s.num_local_replicas(), s.first_local_replica());
  VS_REQUIRE_OK(s.run(made.step));
  CHECK(made.results->take().values() == mine(s, std::vector<int>{0, 1}));
}

// -- the async counterparts of the blocking operations -------------------------------

TEST_CASE("async stats: the coordinator's description, as stats() gives it") {
  auto s = make_strategy(2);
  auto d = wait_for<strategy_description>(
    [&](auto done) { s.async().stats(std::move(done)); });
  REQUIRE(d);
  auto blocking = VS_VALUE(s.stats());
  CHECK(d->devices == blocking.devices);
  CHECK(d->collective == blocking.collective);
}

TEST_CASE("async create_variable: the name, value, sync, agg and trainable "
          "forms") {
  auto s = make_strategy(2);
  auto api = s.async();
  auto a = wait_for<variable>([&](auto done) {
    api.create_variable("a", tensor::scalar<float>(1), std::move(done));
  });
  REQUIRE(a);
  CHECK(a->synchronization() == synchronization::on_write); // auto (C1)
  auto b = wait_for<variable>([&](auto done) {
    api.create_variable("b", tensor::scalar<int64_t>(0),
                        synchronization::on_read, aggregation::sum,
                        std::move(done));
  });
  REQUIRE(b);
  CHECK(b->synchronization() == synchronization::on_read);
  CHECK(b->aggregation() == aggregation::sum);
  auto c = wait_for<variable>([&](auto done) {
    api.create_variable("c", tensor::scalar<float>(0),
                        synchronization::on_write, aggregation::mean, false,
                        std::move(done));
  });
  REQUIRE(c);
  CHECK_FALSE(c->trainable());
  // Bad input: a clear error, nothing created.
  auto dup = wait_for<variable>([&](auto done) {
    api.create_variable("a", tensor::scalar<float>(1), std::move(done));
  });
  REQUIRE_FALSE(dup);
  VS_CHECK_CODE(dup.error(), already_exists);
  CHECK(VS_VALUE(s.variables()).size() == 3);
}

TEST_CASE("async variables: every variable, sorted by name") {
  auto s = make_strategy(2);
  make_var(s, "zeta", tensor::scalar<float>(0), synchronization::on_write,
           aggregation::mean);
  make_var(s, "alpha", tensor::scalar<float>(0), synchronization::on_write,
           aggregation::mean);
  auto vs = wait_for<std::vector<variable>>(
    [&](auto done) { s.async().variables(std::move(done)); });
  REQUIRE(vs);
  REQUIRE(vs->size() == 2);
  CHECK((*vs)[0].name() == "alpha");
  CHECK((*vs)[1].name() == "zeta");
}

TEST_CASE("async survivor_values: every component while no replica failed") {
  auto s = make_strategy(3);
  auto w = make_var(s, "w", tensor::scalar<float>(7),
                    synchronization::on_write, aggregation::mean);
  auto sv = wait_for<std::vector<std::optional<tensor>>>(
    [&](auto done) { s.async().survivor_values(w, std::move(done)); });
  REQUIRE(sv);
  REQUIRE(sv->size() == static_cast<size_t>(s.num_local_replicas()));
  for (auto& x : *sv) {
    REQUIRE(x.has_value());
    CHECK(x->as_double(0) == 7.0);
  }
  auto none = wait_for<std::vector<std::optional<tensor>>>(
    [&](auto done) { s.async().survivor_values(variable{}, std::move(done)); });
  REQUIRE_FALSE(none);
  VS_CHECK_CODE(none.error(), invalid_argument);
}

TEST_CASE("async assign, assign_add, assign_sub: scalar overloads convert to "
          "the variable's dtype") {
  auto s = make_strategy(2);
  auto api = s.async();
  auto n = make_var(s, "n", tensor::scalar<int64_t>(0),
                    synchronization::on_write, aggregation::only_first_replica);
  VS_REQUIRE_OK(wait_done([&](done_callback d) { api.assign(n, 10.0, d); }));
  VS_REQUIRE_OK(wait_done([&](done_callback d) { api.assign_add(n, 5.0, d); }));
  VS_REQUIRE_OK(wait_done([&](done_callback d) { api.assign_sub(n, 3.0, d); }));
  CHECK(VS_VALUE(s.read_scalar<int64_t>(n)) == 12);
  // 0.5 is no int64: refused, nothing changes.
  auto err = wait_done([&](done_callback d) { api.assign(n, 0.5, d); });
  CHECK(err);
  CHECK(VS_VALUE(s.read_scalar<int64_t>(n)) == 12);
}

TEST_CASE("async reduce: the three forms give what the blocking reduce gives",
          "[one-process]") {
  auto s = make_strategy(2);
  auto api = s.async();
  auto values = floats({{1, 2}, {3, 4}});
  auto sum = wait_for<tensor>(
    [&](auto done) { api.reduce(reduce_op::sum, values, std::move(done)); });
  REQUIRE(sum);
  CHECK(sum->to_vector<float>() == std::vector<float>{4, 6});
  auto axis = wait_for<tensor>([&](auto done) {
    api.reduce(reduce_op::sum, values, int64_t{0}, std::move(done));
  });
  REQUIRE(axis);
  CHECK(axis->bitwise_equal(VS_VALUE(s.reduce(reduce_op::sum, values, 0))));
  mirrored<tensor> m{tensor::scalar<float>(3), 2};
  auto msum = wait_for<tensor>(
    [&](auto done) { api.reduce(reduce_op::sum, m, std::move(done)); });
  REQUIRE(msum);
  CHECK(msum->as_double(0) == 6.0);
  // Bad input: the count check of the blocking form.
  auto bad = wait_for<tensor>([&](auto done) {
    api.reduce(reduce_op::sum, floats({{1}}), std::move(done));
  });
  REQUIRE_FALSE(bad);
  VS_CHECK_CODE(bad.error(), invalid_argument);
}

TEST_CASE("async gather: concatenation along the axis", "[one-process]") {
  auto s = make_strategy(2);
  auto g = wait_for<tensor>([&](auto done) {
    s.async().gather(floats({{1, 2}, {3}}), 0, std::move(done));
  });
  REQUIRE(g);
  CHECK(g->to_vector<float>() == std::vector<float>{1, 2, 3});
}

TEST_CASE("async all_reduce and batch_all_reduce: mirrored reductions",
          "[one-process]") {
  auto s = make_strategy(2);
  auto api = s.async();
  auto one = wait_for<mirrored<tensor>>([&](auto done) {
    api.all_reduce(reduce_op::sum, floats({{1, 2}, {3, 4}}), std::move(done));
  });
  REQUIRE(one);
  CHECK(one->num_replicas() == 2);
  CHECK(one->value().to_vector<float>() == std::vector<float>{4, 6});
  auto many = wait_for<std::vector<mirrored<tensor>>>([&](auto done) {
    api.batch_all_reduce(reduce_op::max,
                         {floats({{1}, {5}}), floats({{7, 0}, {2, 9}})},
                         std::move(done));
  });
  REQUIRE(many);
  REQUIRE(many->size() == 2);
  CHECK((*many)[0].value().to_vector<float>() == std::vector<float>{5});
  CHECK((*many)[1].value().to_vector<float>() == std::vector<float>{7, 9});
  auto bad = wait_for<mirrored<tensor>>([&](auto done) {
    api.all_reduce(reduce_op::sum, floats({{1}}), std::move(done));
  });
  REQUIRE_FALSE(bad);
  VS_CHECK_CODE(bad.error(), invalid_argument);
}

// -- one process: the process properties and all_values ----------------------------

TEST_CASE("P1 in one process: every replica is local, all_values is "
          "local_values, reduce of per-replica values is allowed",
          "[one-process]") {
  auto s = make_strategy(3);
  CHECK(s.num_replicas() == 3);
  CHECK(s.num_local_replicas() == 3);
  CHECK(s.first_local_replica() == 0);
  CHECK(s.process_rank() == 0);
  CHECK(s.num_processes() == 1);
  auto c = make_var(s, "c", tensor::scalar<int64_t>(0),
                    synchronization::on_read, aggregation::sum);
  VS_REQUIRE_OK(s.run([&](replica_context& ctx) {
    VS_STEP_OK(ctx.assign(c, double(ctx.replica_id() * 10)));
  }));
  auto all = VS_VALUE(s.all_values(c));
  auto local = VS_VALUE(s.local_values(c));
  REQUIRE(all.size() == 3);
  for (size_t r = 0; r < all.size(); ++r) {
    CHECK(all[r].to_vector<int64_t>()[0] == int64_t(r) * 10);
    CHECK(all[r].bitwise_equal(local[r]));
  }
  auto async_all = wait_for<std::vector<tensor>>(
    [&](auto done) { s.async().all_values(c, std::move(done)); });
  REQUIRE(async_all);
  CHECK(async_all->size() == 3);
  CHECK(s.reduce(reduce_op::sum, floats({{1}, {2}, {3}})));
}

TEST_CASE("P1 in one process: a cluster of one process is no cluster, and a "
          "bad one is refused before anything starts") {
  strategy_options opts;
  opts.devices = {"cpu:0", "cpu:1"};
  cluster_spec one; // world_size 1
  opts.cluster = one;
  auto s = strategy::create(opts);
  REQUIRE(s);
  CHECK(s->num_processes() == 1);
  CHECK(s->num_replicas() == 2);
  s->shutdown();
  cluster_spec bad;
  bad.world_size = 1;
  bad.operation_timeout = std::chrono::milliseconds{0};
  opts.cluster = bad;
  auto refused = strategy::create(opts);
  REQUIRE(!refused);
  CHECK(has_code(refused.error(), errc::invalid_argument));
}
