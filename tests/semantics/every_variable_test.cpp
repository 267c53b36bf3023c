#include "fixture.hpp"

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
    auto values = VS_VALUE(s.local_values(v));
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
  auto survivors = VS_VALUE(s.survivor_values(w));
  REQUIRE(survivors.size() == 3);
  REQUIRE(survivors[0].has_value());
  REQUIRE(survivors[1].has_value());
  CHECK_FALSE(survivors[2].has_value());
  CHECK(survivors[0]->as_double() == 0);
  CHECK(survivors[1]->as_double() == 0);
  // Reported, and later operations that need replica 2 fail at once.
  auto failures = VS_VALUE(s.stats()).failures;
  REQUIRE(failures.size() == 1);
  CHECK(failures[0].find("replica 2") != std::string::npos);
  CHECK(failures[0].find("boom") != std::string::npos);
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
