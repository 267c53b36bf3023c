#include "fixture.hpp"

#include <limits>
#include <thread>

using namespace vs_test;

TEST_CASE("V1: local_values returns all N components in replica order for "
          "every synchronization") {
  auto s = make_strategy(4);
  int k = 0;
  for (auto sync : {synchronization::on_write, synchronization::on_read,
                    synchronization::none}) {
    auto v = make_var(s, "v" + std::to_string(k++), tensor::scalar<int64_t>(0),
                      sync);
    if (sync != synchronization::on_write)
      VS_REQUIRE_OK(s.run([&](replica_context& ctx) {
        VS_STEP_OK(ctx.assign(v, 100.0 + ctx.replica_id()));
      }));
    auto values = VS_VALUE(s.all_values(v));
    REQUIRE(values.size() == 4);
    for (size_t r = 0; r < 4; ++r)
      CHECK(values[r].as_double(0)
            == (sync == synchronization::on_write ? 0 : 100.0 + r));
  }
}

TEST_CASE("V2: failing operations change no component") {
  auto s = make_strategy(3);
  auto w = make_var(s, "w", tensor::from_vector<float>({2}, {1, 2}),
                    synchronization::on_write, aggregation::none);
  auto r = make_var(s, "r", tensor::scalar<int32_t>(5),
                    synchronization::on_read, aggregation::sum);
  auto n = make_var(s, "n", tensor::scalar<double>(1), synchronization::none);
  auto before = take_snapshot(s);
  VS_CHECK_CODE(s.assign(w, tensor::scalar<float>(1)), shape_mismatch);
  VS_CHECK_CODE(s.assign_add(r, tensor::scalar<int64_t>(1)), dtype_mismatch);
  VS_CHECK_CODE(s.assign(r, 0.5), invalid_argument);
  VS_CHECK_CODE(error_of(s.create_variable("w", tensor::scalar<float>(0))),
                already_exists);
  VS_CHECK_CODE(error_of(s.read(n)), no_cross_replica_value);
  // A step whose on_write update fails validation on one replica applies
  // none of its on_write updates, even those issued before the bad one.
  auto err = s.run([&](replica_context& ctx) {
    (void) ctx.assign_add(w, tensor::from_vector<float>({2}, {1, 1}));
    if (ctx.replica_id() == 1)
      (void) ctx.assign_add(w, tensor::scalar<double>(1));
    else
      (void) ctx.assign_add(w, tensor::from_vector<float>({2}, {1, 1}));
  });
  VS_CHECK_CODE(err, dtype_mismatch);
  // aggregation none with differing contributions.
  VS_CHECK_CODE(s.run([&](replica_context& ctx) {
                  VS_STEP_OK(ctx.assign(
                    w, tensor::from_vector<float>(
                         {2}, {1.0f * ctx.replica_id(), 0})));
                }),
                aggregation_required);
  // A destroyed variable is unknown; the others are untouched.
  auto gone = make_var(s, "gone", tensor::scalar<float>(0),
                       synchronization::on_write);
  VS_REQUIRE_OK(s.destroy(gone));
  VS_CHECK_CODE(s.assign(gone, 1.0), unknown_variable);
  VS_CHECK_CODE(error_of(s.lookup("gone")), unknown_variable);
  CHECK(same(before, take_snapshot(s)));
}

TEST_CASE("V3: an overrunning step fails with timeout within its deadline and "
          "applies none of its on_write updates") {
  auto s = make_strategy(2);
  auto w = make_var(s, "w", tensor::scalar<float>(0), synchronization::on_write,
                    aggregation::sum);
  auto before = take_snapshot(s);
  auto fast = s.with_timeout(300ms);
  auto start = std::chrono::steady_clock::now();
  auto err = fast.run([&](replica_context& ctx) {
    VS_STEP_OK(ctx.assign_add(w, 1.0));
    if (ctx.replica_id() == 1)
      std::this_thread::sleep_for(1500ms);
  });
  auto elapsed = std::chrono::steady_clock::now() - start;
  VS_CHECK_CODE(err, timeout);
  CHECK(elapsed < 1400ms);
  // Later operations still work and see no update of the failed step.
  std::this_thread::sleep_for(1500ms);
  CHECK(same(before, take_snapshot(s)));
  VS_REQUIRE_OK(s.assign_add(w, 2.0));
  CHECK(components(s, w) == std::vector<double>{2, 2});
}

TEST_CASE("V3: a step that throws on one replica fails with replica_failed "
          "and stops that replica") {
  auto s = make_strategy(3);
  auto w = make_var(s, "w", tensor::scalar<float>(0), synchronization::on_write,
                    aggregation::sum);
  auto err = s.run([&](replica_context& ctx) {
    VS_STEP_OK(ctx.assign_add(w, 1.0));
    if (ctx.replica_id() == 2)
      throw std::runtime_error("boom");
  });
  VS_CHECK_CODE(err, replica_failed);
  CHECK(message_of(err).find("boom") != std::string::npos);
  // No ON_WRITE update of the step applied on the survivors.
  // This process's replicas (all of them in one process).
  auto survivors = VS_VALUE(s.survivor_values(w));
  REQUIRE(survivors.size() == static_cast<size_t>(s.num_local_replicas()));
  for (size_t i = 0; i < survivors.size(); ++i) {
    const auto r = s.first_local_replica() + static_cast<int>(i);
    CHECK(survivors[i].has_value() == (r != 2));
    if (survivors[i])
      CHECK(survivors[i]->as_double() == 0);
  }
  // Reported where replica 2 lives, and later operations that need it fail
  // at once everywhere.
  auto failures = VS_VALUE(s.stats()).failures;
  const bool holds_2 = s.first_local_replica() + s.num_local_replicas() > 2;
  REQUIRE(failures.size() == (holds_2 ? 1u : 0u));
  if (holds_2) {
    CHECK(failures[0].find("replica 2") != std::string::npos);
    CHECK(failures[0].find("boom") != std::string::npos);
  }
  VS_CHECK_CODE(s.assign_add(w, 1.0), replica_failed);
}

TEST_CASE("V3: with on_step_exception::fail_step a step that throws fails "
          "and the replica keeps serving") {
  auto s = make_strategy(3, 20s, on_step_exception::fail_step);
  auto w = make_var(s, "w", tensor::scalar<float>(0), synchronization::on_write,
                    aggregation::sum);
  auto err = s.run([&](replica_context& ctx) {
    VS_STEP_OK(ctx.assign_add(w, 1.0));
    if (ctx.replica_id() == 2)
      throw std::runtime_error("boom");
  });
  VS_CHECK_CODE(err, replica_failed);
  CHECK(message_of(err).find("boom") != std::string::npos);
  CHECK(components(s, w) == std::vector<double>{0, 0, 0});
  CHECK(VS_VALUE(s.stats()).failures.empty());
  VS_REQUIRE_OK(s.assign_add(w, 2.0));
  CHECK(components(s, w) == std::vector<double>{2, 2, 2});
}

TEST_CASE("V3: calls after shutdown fail at once instead of hanging") {
  auto s = make_strategy(2);
  auto w = make_var(s, "w", tensor::scalar<float>(0), synchronization::on_write);
  s.shutdown();
  auto start = std::chrono::steady_clock::now();
  VS_CHECK_CODE(s.assign(w, 1.0), shut_down);
  VS_CHECK_CODE(error_of(s.read(w)), shut_down);
  CHECK(std::chrono::steady_clock::now() - start < 5s);
}

// -- V4: integer overflow fails with `overflow` and changes nothing ----------------

namespace {

constexpr int32_t max32 = std::numeric_limits<int32_t>::max();
constexpr int64_t max64 = std::numeric_limits<int64_t>::max();
constexpr int64_t min64 = std::numeric_limits<int64_t>::min();

tensor i32v(std::vector<int32_t> xs) {
  auto n = static_cast<int64_t>(xs.size());
  return tensor::from_vector<int32_t>({n}, xs);
}

} // namespace

TEST_CASE("V4: cross-replica integer assign_add / assign_sub that overflow "
          "fail with overflow and change no component") {
  auto s = make_strategy(3);
  auto w32 = make_var(s, "w32", i32v({1, 2}), synchronization::on_write,
                      aggregation::sum);
  auto w64 = make_var(s, "w64", tensor::scalar<int64_t>(7),
                      synchronization::on_write);
  auto r_sum = make_var(s, "r_sum", tensor::scalar<int64_t>(0),
                        synchronization::on_read, aggregation::sum);
  auto r_ofr = make_var(s, "r_ofr", tensor::scalar<int32_t>(0),
                        synchronization::on_read,
                        aggregation::only_first_replica);
  auto none = make_var(s, "none", i32v({0, 0}), synchronization::none);
  VS_REQUIRE_OK(s.run([&](replica_context& ctx) {
    auto r = ctx.replica_id();
    VS_STEP_OK(ctx.assign(r_sum, 10.0 * (r + 1)));
    VS_STEP_OK(ctx.assign(r_ofr, 20.0 + r));
    VS_STEP_OK(ctx.assign(none, i32v({r, 2 * r})));
  }));
  auto before = take_snapshot(s);
  SECTION("on_write int32: element 0 fits, element 1 overflows") {
    auto err = s.assign_add(w32, i32v({max32 - 1, max32 - 1}));
    VS_CHECK_CODE(err, overflow);
    CHECK(message_of(err).find("'w32'") != std::string::npos);
    CHECK(message_of(err).find("element 1") != std::string::npos);
  }
  SECTION("on_write int64 assign_sub below the minimum") {
    VS_CHECK_CODE(s.assign_sub(w64, tensor::scalar<int64_t>(min64)), overflow);
    VS_CHECK_CODE(s.assign_add(w64, tensor::scalar<int64_t>(max64)),
                  overflow);
  }
  SECTION("on_read sum int64 (component 0 only)") {
    VS_CHECK_CODE(s.assign_add(r_sum, tensor::scalar<int64_t>(max64)),
                  overflow);
  }
  SECTION("on_read only_first_replica: only replica 2's component overflows") {
    // 20 + (max - 21) and 21 + (max - 21) fit; 22 + (max - 21) does not.
    VS_CHECK_CODE(s.assign_add(r_ofr, tensor::scalar<int32_t>(max32 - 21)),
                  overflow);
  }
  SECTION("none: only replica 2's component overflows") {
    VS_CHECK_CODE(s.assign_add(none, i32v({max32 - 1, 0})), overflow);
  }
  CHECK(same(before, take_snapshot(s)));
  // In range still works, exactly.
  VS_REQUIRE_OK(s.assign_add(r_ofr, tensor::scalar<int32_t>(max32 - 22)));
  CHECK(components(s, r_ofr)
        == std::vector<double>{max32 - 2.0, max32 - 1.0, max32});
}

TEST_CASE("V4: a replica step whose integer contributions overflow in the "
          "sum or in the update fails with overflow and applies nothing") {
  auto s = make_strategy(3);
  auto w32 = make_var(s, "w32", i32v({1, 2}), synchronization::on_write,
                      aggregation::sum);
  auto other = make_var(s, "other", tensor::scalar<float>(1.f),
                        synchronization::on_write, aggregation::sum);
  auto w64 = make_var(s, "w64", tensor::scalar<int64_t>(0),
                      synchronization::on_write, aggregation::sum);
  auto local = make_var(s, "local", tensor::scalar<int64_t>(5),
                        synchronization::on_read, aggregation::sum);
  auto before = take_snapshot(s);
  SECTION("the sum of the contributions does not fit int32") {
    auto err = s.run([&](replica_context& ctx) {
      VS_STEP_OK(ctx.assign_add(other, 1.0)); // applied with the rest or not
      VS_STEP_OK(ctx.assign_add(w32, i32v({max32 / 2, 0})));
    });
    VS_CHECK_CODE(err, overflow);
    CHECK(message_of(err).find("'w32'") != std::string::npos);
  }
  SECTION("the sum fits, the update of element 1 does not") {
    VS_CHECK_CODE(s.run([&](replica_context& ctx) {
      VS_STEP_OK(ctx.assign_add(w32, i32v({max32 / 3, max32 / 3})));
    }),
                  overflow);
  }
  SECTION("int64 sum of the contributions") {
    VS_CHECK_CODE(s.run([&](replica_context& ctx) {
      VS_STEP_OK(ctx.assign_add(w64, tensor::scalar<int64_t>(max64 / 2)));
    }),
                  overflow);
  }
  SECTION("a replica-context update of an on_read component") {
    std::vector<caf::error> errors(3);
    auto err = s.run([&](replica_context& ctx) {
      errors[static_cast<size_t>(ctx.replica_id())]
        = ctx.assign_add(local, tensor::scalar<int64_t>(max64));
    });
    VS_CHECK_CODE(err, overflow);
    for (auto& e : mine(s, errors))
      VS_CHECK_CODE(e, overflow);
  }
  CHECK(same(before, take_snapshot(s)));
  // In range: exact, and the int32 sum may pass through values outside int32
  // on the way (computed in int64).
  VS_REQUIRE_OK(s.run([&](replica_context& ctx) {
    int32_t x = ctx.replica_id() == 2 ? -max32 : max32 - 1;
    VS_STEP_OK(ctx.assign_add(w32, i32v({x, 0})));
  }));
  CHECK(VS_VALUE(s.read(w32)).to_vector<int32_t>()
        == std::vector<int32_t>{max32 - 1, 2});
}

TEST_CASE("V4: integer reductions that do not fit the dtype fail with "
          "overflow: on_read reads, reduce, all_reduce") {
  auto s = make_strategy(3);
  // Small (gathered) and large (collective) on_read sums.
  auto small = make_var(s, "small", tensor::scalar<int64_t>(0),
                        synchronization::on_read, aggregation::sum);
  auto large = make_var(s, "large", tensor::zeros(dtype::int32, {4096}),
                        synchronization::on_read, aggregation::sum);
  VS_REQUIRE_OK(s.run([&](replica_context& ctx) {
    VS_STEP_OK(ctx.assign(small, tensor::scalar<int64_t>(max64 / 2)));
    auto x = tensor::zeros(dtype::int32, {4096});
    x.mutable_data<int32_t>()[4000] = max32 / 2;
    VS_STEP_OK(ctx.assign(large, x));
  }));
  auto before = take_snapshot(s);
  auto small_read = s.read(small);
  VS_CHECK_CODE(error_of(small_read), overflow);
  if (!small_read)
    CHECK(message_of(small_read.error()).find("'small'") != std::string::npos);
  auto large_read = s.read(large);
  VS_CHECK_CODE(error_of(large_read), overflow);
  if (!large_read)
    CHECK(message_of(large_read.error()).find("'large'") != std::string::npos);
  CHECK(same(before, take_snapshot(s)));
  // Across processes each passes its own replicas' values (row P7).
  auto three = [&s](tensor a, tensor b, tensor c) {
    return per_replica<tensor>{mine(s, std::vector<tensor>{a, b, c})};
  };
  auto big = three(tensor::scalar<int32_t>(max32), tensor::scalar<int32_t>(1),
                   tensor::scalar<int32_t>(0));
  VS_CHECK_CODE(error_of(s.all_reduce(reduce_op::sum, big)), overflow);
  auto prod = three(tensor::scalar<int64_t>(max64 / 2),
                    tensor::scalar<int64_t>(3), tensor::scalar<int64_t>(1));
  VS_CHECK_CODE(error_of(s.all_reduce(reduce_op::prod, prod)), overflow);
  // Fits: exact, though a partial sum leaves int32 (max + 1 - 1); min/max
  // never overflow.
  auto fits = three(tensor::scalar<int32_t>(max32), tensor::scalar<int32_t>(1),
                    tensor::scalar<int32_t>(-1));
  CHECK(VS_VALUE(s.all_reduce(reduce_op::sum, fits)).value().as_double(0)
        == max32);
  CHECK(VS_VALUE(s.all_reduce(reduce_op::max, big)).value().as_double(0)
        == max32);
  if (s.num_processes() > 1) {
    // P7: reduce of per-replica values stays in one process.
    VS_CHECK_CODE(error_of(s.reduce(reduce_op::sum, big)), invalid_argument);
    return;
  }
  VS_CHECK_CODE(error_of(s.reduce(reduce_op::sum, big)), overflow);
  VS_CHECK_CODE(error_of(s.reduce(reduce_op::sum,
                                  three(i32v({max32}), i32v({1}), i32v({})),
                                  0)),
                overflow);
  VS_CHECK_CODE(error_of(s.reduce(reduce_op::sum,
                                  mirrored<tensor>{tensor::scalar<int64_t>(
                                                     max64 / 2),
                                                   3})),
                overflow);
  CHECK(VS_VALUE(s.reduce(reduce_op::max, big)).as_double(0) == max32);
}
