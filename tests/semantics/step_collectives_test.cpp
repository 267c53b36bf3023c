// X1-X5: collectives inside a step (coroutine steps), docs/semantics.md.

#include "fixture.hpp"

#include <atomic>
#include <thread>

using namespace vs_test;

namespace {

tensor vec_f(std::vector<float> values) {
  const auto n = static_cast<int64_t>(values.size());
  return tensor::from_vector<float>({n}, values);
}

/// A helper that reaches a collective is a coroutine too: the global norm
/// of the replicas' gradients (sum of squares all-reduced).
step_task<double> global_norm(replica_context& ctx, tensor g) {
  double local = 0;
  for (float x : g.to_vector<float>())
    local += double{x} * x;
  auto total = co_await ctx.all_reduce(reduce_op::sum,
                                       tensor::scalar<double>(local));
  co_return std::sqrt(total.as_double(0));
}

/// Counts live frames of a step: destroyed with the step, also when it is
/// abandoned at a collective.
struct frame_guard {
  std::atomic<int>* live;
  explicit frame_guard(std::atomic<int>& n) : live(&n) { ++*live; }
  ~frame_guard() { --*live; }
  frame_guard(const frame_guard&) = delete;
  frame_guard& operator=(const frame_guard&) = delete;
};

} // namespace

TEST_CASE("X1: all_reduce inside a step gives every replica the reduction "
          "over all replicas") {
  auto s = make_strategy(3);
  const int n = s.num_replicas();
  struct row {
    reduce_op op;
    std::vector<float> expected;
  };
  // Replica r contributes [r + 1, 2 (r + 1)].
  for (auto& each : {row{reduce_op::sum, {6, 12}}, row{reduce_op::mean, {2, 4}},
                     row{reduce_op::min, {1, 2}}, row{reduce_op::max, {3, 6}},
                     row{reduce_op::prod, {6, 48}}}) {
    const auto op = each.op;
    INFO("op " << to_string(op));
    auto out = VS_VALUE(s.run([op](replica_context& ctx)
                                -> step_task<std::vector<float>> {
      const float x = static_cast<float>(ctx.replica_id() + 1);
      // GCC 12 rejects a braced list inside a co_await expression: the
      // value is built first.
      auto mine = vec_f({x, 2 * x});
      auto y = co_await ctx.all_reduce(op, mine);
      co_return y.to_vector<float>();
    }));
    REQUIRE(out.size() == static_cast<size_t>(s.num_local_replicas()));
    for (auto& v : out.values())
      CHECK(v == each.expected);
  }
  REQUIRE(n == 3);
  // Integers reduce exactly; a sum that leaves int32 is overflow.
  auto ints = VS_VALUE(s.run([](replica_context& ctx) -> step_task<int64_t> {
    auto y = co_await ctx.all_reduce(
      reduce_op::sum, tensor::scalar<int32_t>(ctx.replica_id() + 40));
    co_return static_cast<int64_t>(y.as_double(0));
  }));
  for (auto v : ints.values())
    CHECK(v == 123);
  auto err = s.run([](replica_context& ctx) -> step_task<> {
    co_await ctx.all_reduce(reduce_op::sum,
                            tensor::scalar<int32_t>(2'000'000'000));
  });
  VS_CHECK_CODE(err, overflow);
}

TEST_CASE("X1: all_gather joins the replicas' values along the axis in "
          "replica order") {
  auto s = make_strategy(2);
  auto out = VS_VALUE(s.run([](replica_context& ctx)
                              -> step_task<std::vector<tensor>> {
    const float r = static_cast<float>(ctx.replica_id());
    auto x = tensor::from_vector<float>({1, 2}, {r, r + 10});
    auto rows = co_await ctx.all_gather(x, 0);
    auto cols = co_await ctx.all_gather(x, -1);
    co_return std::vector<tensor>{rows, cols};
  }));
  for (auto& v : out.values()) {
    CHECK(v[0].shape() == tensor_shape{2, 2});
    CHECK(v[0].to_vector<float>() == std::vector<float>{0, 10, 1, 11});
    CHECK(v[1].shape() == tensor_shape{1, 4});
    CHECK(v[1].to_vector<float>() == std::vector<float>{0, 10, 1, 11});
  }
}

TEST_CASE("X1: all_gather in one process takes values of different sizes "
          "along the axis",
          "[one-process]") {
  auto s = make_strategy(3);
  auto out = VS_VALUE(s.run([](replica_context& ctx) -> step_task<tensor> {
    // Replica r has r + 1 rows of its id.
    const auto r = ctx.replica_id();
    std::vector<int32_t> rows(static_cast<size_t>(r + 1), r);
    auto mine = tensor::from_vector<int32_t>({r + 1}, rows);
    co_return co_await ctx.all_gather(mine);
  }));
  for (auto& v : out.values())
    CHECK(v.to_vector<int32_t>() == std::vector<int32_t>{0, 1, 1, 2, 2, 2});
}

TEST_CASE("X1: broadcast gives every replica the root's value") {
  auto s = make_strategy(3);
  for (int root : {0, 2}) {
    INFO("root " << root);
    auto out = VS_VALUE(s.run([root](replica_context& ctx)
                                -> step_task<std::vector<float>> {
      const float r = static_cast<float>(ctx.replica_id());
      auto mine = vec_f({r, -r});
      auto y = co_await ctx.broadcast(mine, root);
      co_return y.to_vector<float>();
    }));
    for (auto& v : out.values())
      CHECK(v == std::vector<float>{float(root), -float(root)});
  }
}

TEST_CASE("X1: several values in one collective, several collectives in a "
          "step, helpers that await, and updates from the results") {
  auto s = make_strategy(4);
  auto w = make_var(s, "w", vec_f({10, 10}), synchronization::on_write,
                    aggregation::mean);
  auto calls = make_var(s, "calls", tensor::scalar<int64_t>(0),
                        synchronization::on_read, aggregation::sum);
  auto norms = VS_VALUE(s.run([&](replica_context& ctx) -> step_task<double> {
    const float r = static_cast<float>(ctx.replica_id());
    // A replica-local update before the first collective stays (R1).
    VS_STEP_OK(ctx.assign_add(calls, 1.0));
    std::vector<tensor> grads{vec_f({r, 1}), tensor::scalar<float>(r)};
    auto sums = co_await ctx.all_reduce(reduce_op::sum, std::move(grads));
    if (sums.size() != 2)
      throw std::runtime_error("expected two results");
    // Global-norm clipping of the summed gradient, the same everywhere.
    const double norm = co_await global_norm(ctx, sums[0]);
    const double scale = norm > 1 ? 1 / norm : 1;
    auto g = sums[0].to_vector<float>();
    for (auto& x : g)
      x = static_cast<float>(x * scale);
    VS_STEP_OK(ctx.assign_sub(w, vec_f(g)));
    co_return norm * sums[1].as_double(0) / 6;
  }));
  // sum over 4 replicas: [0+1+2+3, 4] = [6, 4]; the norm reduces
  // [6, 4]'s squares summed over 4 replicas: sqrt(4 * 52).
  const double norm = std::sqrt(4.0 * 52.0);
  for (auto v : norms.values())
    CHECK(v == Approx(norm));
  auto got = VS_VALUE(s.read(w)).to_vector<float>();
  CHECK(got[0] == Approx(10 - 6 / norm));
  CHECK(got[1] == Approx(10 - 4 / norm));
  CHECK(all_components_equal(s, w));
  CHECK(read_scalar(s, calls) == 4);
}

TEST_CASE("X2: steps waiting at collectives hold no scheduler thread: eight "
          "replicas on two threads") {
  auto s = make_strategy(8); // two scheduler threads (fixture)
  auto out = VS_VALUE(s.run([](replica_context& ctx) -> step_task<double> {
    double acc = 0;
    for (int round = 0; round < 5; ++round) {
      auto y = co_await ctx.all_reduce(
        reduce_op::sum, tensor::scalar<double>(ctx.replica_id() + round));
      acc += y.as_double(0);
    }
    co_return acc;
  }));
  // Each round: 28 + 8 * round.
  for (auto v : out.values())
    CHECK(v == 5 * 28 + 8 * (0 + 1 + 2 + 3 + 4));
}

TEST_CASE("X2: plain steps and other operations queued behind a waiting "
          "step run after it, in order") {
  auto s = make_strategy(2);
  auto w = make_var(s, "w", tensor::scalar<float>(0), synchronization::on_write,
                    aggregation::sum);
  std::atomic<int> done{0};
  auto a = s.async();
  for (int k = 0; k < 3; ++k) {
    a.run(
      [&w](replica_context& ctx) -> step_task<> {
        auto y = co_await ctx.all_reduce(reduce_op::sum,
                                         tensor::scalar<float>(1));
        VS_STEP_OK(ctx.assign_add(w, y.as_double(0)));
      },
      [&done](caf::error err) {
        if (!err)
          ++done;
      });
    a.run([&w](replica_context& ctx) { VS_STEP_OK(ctx.assign_add(w, 1.0)); },
          [&done](caf::error err) {
            if (!err)
              ++done;
          });
  }
  // A blocking read after the burst sees all of it.
  REQUIRE(s.num_replicas() == 2);
  auto deadline = std::chrono::steady_clock::now() + 20s;
  while (done.load() < 6 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(1ms);
  CHECK(done.load() == 6);
  // Per step: coroutine adds 2 per replica (sum of 2 ones) -> 4; plain 2.
  CHECK(read_scalar(s, w) == 3 * (4 + 2));
}

TEST_CASE("X3: replicas that reach different collectives fail the step, "
          "nothing applied, frames destroyed") {
  auto s = make_strategy(3, 20s, on_step_exception::fail_step);
  auto w = make_var(s, "w", tensor::scalar<float>(0), synchronization::on_write,
                    aggregation::sum);
  std::atomic<int> live{0};
  auto step_with = [&](auto&& reach) {
    return s.run([&](replica_context& ctx) -> step_task<> {
      frame_guard guard{live};
      VS_STEP_OK(ctx.assign_add(w, 1.0));
      co_await reach(ctx);
      VS_STEP_OK(ctx.assign_add(w, 1.0));
    });
  };
  SECTION("another kind") {
    auto err = step_with([](replica_context& ctx) -> step_task<> {
      auto x = tensor::scalar<float>(1);
      if (ctx.replica_id() == 1)
        co_await ctx.broadcast(x, 0);
      else
        co_await ctx.all_reduce(reduce_op::sum, x);
    });
    VS_CHECK_CODE(err, mismatched_replica_updates);
  }
  SECTION("another op") {
    auto err = step_with([](replica_context& ctx) -> step_task<> {
      co_await ctx.all_reduce(ctx.replica_id() == 2 ? reduce_op::max
                                                    : reduce_op::sum,
                              tensor::scalar<float>(1));
    });
    VS_CHECK_CODE(err, mismatched_replica_updates);
    CHECK(message_of(err).find("all_reduce max") != std::string::npos);
  }
  SECTION("one replica ends its step while the others wait") {
    auto err = step_with([](replica_context& ctx) -> step_task<> {
      if (ctx.replica_id() != 0)
        co_await ctx.all_reduce(reduce_op::sum, tensor::scalar<float>(1));
    });
    VS_CHECK_CODE(err, mismatched_replica_updates);
  }
  SECTION("another shape") {
    auto err = step_with([](replica_context& ctx) -> step_task<> {
      std::vector<float> x(ctx.replica_id() == 1 ? 3 : 2, 1.0f);
      co_await ctx.all_reduce(reduce_op::sum, vec_f(x));
    });
    // One process compares shapes; processes compare their operations.
    if (across_processes())
      CHECK((has_code(err, errc::shape_mismatch)
             || has_code(err, errc::mismatched_replica_updates)));
    else
      VS_CHECK_CODE(err, shape_mismatch);
  }
  SECTION("another dtype") {
    auto err = step_with([](replica_context& ctx) -> step_task<> {
      if (ctx.replica_id() == 1)
        co_await ctx.all_reduce(reduce_op::sum, tensor::scalar<double>(1));
      else
        co_await ctx.all_reduce(reduce_op::sum, tensor::scalar<float>(1));
    });
    if (across_processes())
      CHECK((has_code(err, errc::dtype_mismatch)
             || has_code(err, errc::mismatched_replica_updates)));
    else
      VS_CHECK_CODE(err, dtype_mismatch);
  }
  // Nothing of the failed step applied, and the strategy goes on.
  CHECK(read_scalar(s, w) == 0);
  VS_REQUIRE_OK(s.run([&](replica_context& ctx) -> step_task<> {
    auto y = co_await ctx.all_reduce(reduce_op::sum, tensor::scalar<float>(1));
    VS_STEP_OK(ctx.assign_add(w, y.as_double(0)));
  }));
  CHECK(read_scalar(s, w) == 9);
  // Every frame is gone: the abort is a message of its own to each replica,
  // handled before the next step (the coordinator's messages arrive in
  // order), not necessarily before the failed run returned (a read asks
  // only one replica).
  CHECK(live.load() == 0);
}

TEST_CASE("X4: bad collectives inside a step fail it with a clear error and "
          "change nothing") {
  auto s = make_strategy(2);
  auto w = make_var(s, "w", tensor::scalar<float>(0), synchronization::on_write,
                    aggregation::sum);
  auto fails_with = [&](auto&& reach) {
    return s.run([&](replica_context& ctx) -> step_task<> {
      VS_STEP_OK(ctx.assign_add(w, 1.0));
      co_await reach(ctx);
    });
  };
  VS_CHECK_CODE(fails_with([](replica_context& ctx) -> step_task<> {
                  co_await ctx.broadcast(tensor::scalar<float>(1), 2);
                }),
                invalid_argument);
  VS_CHECK_CODE(fails_with([](replica_context& ctx) -> step_task<> {
                  co_await ctx.broadcast(tensor::scalar<float>(1), -1);
                }),
                invalid_argument);
  VS_CHECK_CODE(fails_with([](replica_context& ctx) -> step_task<> {
                  co_await ctx.all_gather(tensor::scalar<float>(1));
                }),
                invalid_argument);
  VS_CHECK_CODE(fails_with([](replica_context& ctx) -> step_task<> {
                  auto x = vec_f({1, 2});
                  co_await ctx.all_gather(x, 1);
                }),
                invalid_argument);
  VS_CHECK_CODE(fails_with([](replica_context& ctx) -> step_task<> {
                  co_await ctx.all_reduce(reduce_op::mean,
                                          tensor::scalar<int32_t>(1));
                }),
                invalid_argument);
  CHECK(read_scalar(s, w) == 0);
  // The replicas keep serving.
  VS_REQUIRE_OK(s.run([&](replica_context& ctx) { VS_STEP_OK(ctx.assign_add(w, 1.0)); }));
  CHECK(read_scalar(s, w) == 2);
}

TEST_CASE("X4: a step that throws after a collective fails on every replica "
          "with nothing applied") {
  auto s = make_strategy(3, 20s, on_step_exception::fail_step);
  auto w = make_var(s, "w", tensor::scalar<float>(0), synchronization::on_write,
                    aggregation::sum);
  auto err = s.run([&](replica_context& ctx) -> step_task<> {
    VS_STEP_OK(ctx.assign_add(w, 1.0));
    auto y = co_await ctx.all_reduce(reduce_op::sum, tensor::scalar<float>(1));
    if (ctx.replica_id() == 1)
      throw std::runtime_error("after the all_reduce: " + std::to_string(y.as_double(0)));
    VS_STEP_OK(ctx.assign_add(w, y.as_double(0)));
  });
  VS_CHECK_CODE(err, replica_failed);
  CHECK(message_of(err).find("after the all_reduce: 3") != std::string::npos);
  CHECK(read_scalar(s, w) == 0);
}

TEST_CASE("X4: the step's deadline covers its collectives", "[one-process]") {
  auto s = make_strategy(2, 300ms, on_step_exception::fail_step);
  auto w = make_var(s, "w", tensor::scalar<float>(0), synchronization::on_write,
                    aggregation::sum);
  auto err = s.run([&](replica_context& ctx) -> step_task<> {
    VS_STEP_OK(ctx.assign_add(w, 1.0));
    auto y = co_await ctx.all_reduce(reduce_op::sum, tensor::scalar<float>(1));
    if (ctx.replica_id() == 1)
      std::this_thread::sleep_for(500ms); // replica 0 waits at the second
    co_await ctx.all_reduce(reduce_op::sum, y);
  });
  VS_CHECK_CODE(err, timeout);
  // Replica 1 leaves its step when it wakes; the next one runs.
  std::this_thread::sleep_for(400ms);
  VS_REQUIRE_OK(s.run([&](replica_context& ctx) -> step_task<> {
    auto y = co_await ctx.all_reduce(reduce_op::sum, tensor::scalar<float>(1));
    VS_STEP_OK(ctx.assign_add(w, y.as_double(0)));
  }));
  CHECK(read_scalar(s, w) == 4);
}
