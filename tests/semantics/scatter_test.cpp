// S1-S6: sparse updates (scatter_*), docs/semantics.md.

#include "fixture.hpp"

using namespace vs_test;

namespace {

tensor rows_f(std::vector<float> values, int64_t k, int64_t width = 1) {
  if (width == 1)
    return tensor::from_vector<float>({k}, values);
  return tensor::from_vector<float>({k, width}, values);
}

std::vector<std::vector<float>> all_components_f(const strategy& s,
                                                 const variable& v) {
  std::vector<std::vector<float>> out;
  for (auto& t : VS_VALUE(s.all_values(v)))
    out.push_back(t.to_vector<float>());
  return out;
}

/// Replica r scatters `op` with indices[r] and values[r] into v.
caf::error step_scatter(const strategy& s, const variable& v, scatter_op op,
                        std::vector<std::vector<int64_t>> indices,
                        std::vector<tensor> values) {
  return s.run([&](replica_context& ctx) {
    auto r = static_cast<size_t>(ctx.replica_id());
    VS_STEP_OK(ctx.scatter(v, op, indices[r], values[r]));
  });
}

} // namespace

TEST_CASE("S1: a step's scatter_sub of a mean on_write variable gives "
          "TensorFlow's result") {
  auto s = make_strategy(2);
  auto v = make_var(s, "emb", tensor::from_vector<float>({3}, {0, 0, 0}),
                    synchronization::on_write, aggregation::mean);
  // Replica 0: [0, 1] at [0, 1]; replica 1: [1, 2] at [1, 2].
  VS_REQUIRE_OK(step_scatter(s, v, scatter_op::sub, {{0, 1}, {1, 2}},
                             {rows_f({0, 1}, 2), rows_f({1, 2}, 2)}));
  for (auto& c : all_components_f(s, v))
    CHECK(c == std::vector<float>{0, -1, -1});
}

TEST_CASE("S1: a step's scatter combines the contributions row by row per "
          "aggregation (W4)") {
  auto s = make_strategy(3);
  // Rows of width 2. Replica r adds (r + 1) to row r and 10 to row 3.
  std::vector<std::vector<int64_t>> idx{{0, 3}, {1, 3}, {2, 3}};
  std::vector<tensor> vals;
  for (int r = 0; r < 3; ++r)
    vals.push_back(rows_f({r + 1.0f, r + 1.0f, 10, 10}, 2, 2));
  struct row {
    aggregation agg;
    std::vector<float> expected; // component after scatter_add into zeros
  };
  int k = 0;
  for (auto& [agg, expected] :
       {row{aggregation::sum, {1, 1, 2, 2, 3, 3, 30, 30, 0, 0}},
        row{aggregation::mean, {1.f / 3, 1.f / 3, 2.f / 3, 2.f / 3, 1, 1, 10,
                                10, 0, 0}},
        row{aggregation::only_first_replica, {1, 1, 0, 0, 0, 0, 10, 10, 0, 0}}}) {
    INFO("aggregation " << to_string(agg));
    auto v = make_var(s, "t" + std::to_string(k++),
                      tensor::zeros(dtype::float32, {5, 2}),
                      synchronization::on_write, agg);
    VS_REQUIRE_OK(step_scatter(s, v, scatter_op::add, idx, vals));
    for (auto& c : all_components_f(s, v)) {
      REQUIRE(c.size() == expected.size());
      for (size_t i = 0; i < c.size(); ++i)
        CHECK(c[i] == Approx(expected[i]));
    }
  }
  SECTION("scatter_update with sum sets each row to the sum of what the "
          "replicas wrote there (W4's assign; TF keeps one of them)") {
    auto v = make_var(s, "u", tensor::filled(dtype::float32, {5, 2}, 7),
                      synchronization::on_write, aggregation::sum);
    VS_REQUIRE_OK(step_scatter(s, v, scatter_op::update, idx, vals));
    for (auto& c : all_components_f(s, v))
      CHECK(c == std::vector<float>{1, 1, 2, 2, 3, 3, 30, 30, 7, 7});
  }
  SECTION("aggregation none: equal contributions apply once") {
    auto v = make_var(s, "n", tensor::zeros(dtype::float32, {5, 2}),
                      synchronization::on_write, aggregation::none);
    std::vector<tensor> same_vals(3, rows_f({4, 5}, 1, 2));
    VS_REQUIRE_OK(step_scatter(s, v, scatter_op::add, {{2}, {2}, {2}},
                               same_vals));
    for (auto& c : all_components_f(s, v))
      CHECK(c == std::vector<float>{0, 0, 0, 0, 4, 5, 0, 0, 0, 0});
  }
  SECTION("aggregation none: differing rows fail and change nothing") {
    auto v = make_var(s, "n", tensor::zeros(dtype::float32, {5, 2}),
                      synchronization::on_write, aggregation::none);
    auto before = take_snapshot(s);
    auto err = step_scatter(s, v, scatter_op::add, idx, vals);
    VS_CHECK_CODE(err, aggregation_required);
    CHECK(message_of(err).find("'n'") != std::string::npos);
    CHECK(same(before, take_snapshot(s)));
  }
}

TEST_CASE("S1: scatters apply with the step's other updates, in issue order, "
          "all or none") {
  auto s = make_strategy(2);
  auto v = make_var(s, "w", tensor::from_vector<float>({4}, {1, 1, 1, 1}),
                    synchronization::on_write, aggregation::sum);
  auto d = make_var(s, "d", tensor::scalar<float>(0), synchronization::on_write,
                    aggregation::sum);
  // assign_add 1 (x2 replicas), then row 1 times 3 (sum of 1.5 + 1.5),
  // then assign_sub 1 (x2).
  VS_REQUIRE_OK(s.run([&](replica_context& ctx) {
    VS_STEP_OK(ctx.assign_add(v, tensor::filled(dtype::float32, {4}, 1)));
    VS_STEP_OK(ctx.scatter_mul(v, {1}, rows_f({1.5f}, 1)));
    VS_STEP_OK(ctx.assign_add(d, 1.0));
    VS_STEP_OK(ctx.assign_sub(v, tensor::filled(dtype::float32, {4}, 1)));
  }));
  for (auto& c : all_components_f(s, v))
    CHECK(c == std::vector<float>{1, 7, 1, 1});
  CHECK(VS_VALUE(s.read(d)).as_double(0) == 2);
  SECTION("W6: a scatter where another replica issues a dense update fails "
          "the step") {
    auto before = take_snapshot(s);
    auto err = s.run([&](replica_context& ctx) {
      VS_STEP_OK(ctx.assign_add(d, 1.0));
      if (ctx.replica_id() == 0)
        VS_STEP_OK(ctx.scatter_add(v, {0}, rows_f({1}, 1)));
      else
        VS_STEP_OK(ctx.assign_add(v, tensor::filled(dtype::float32, {4}, 1)));
    });
    VS_CHECK_CODE(err, mismatched_replica_updates);
    CHECK(message_of(err).find("scatter_add") != std::string::npos);
    CHECK(same(before, take_snapshot(s)));
  }
  SECTION("W6: different scatter ops fail the step") {
    auto before = take_snapshot(s);
    auto err = s.run([&](replica_context& ctx) {
      VS_STEP_OK(ctx.scatter(v,
                             ctx.replica_id() == 0 ? scatter_op::add
                                                   : scatter_op::sub,
                             {0}, rows_f({1}, 1)));
    });
    VS_CHECK_CODE(err, mismatched_replica_updates);
    CHECK(same(before, take_snapshot(s)));
  }
  SECTION("V4: an int32 row that would overflow fails the whole step") {
    auto i = make_var(s, "i", tensor::from_vector<int32_t>({2}, {2147483600, 0}),
                      synchronization::on_write, aggregation::sum);
    auto before = take_snapshot(s);
    auto err = s.run([&](replica_context& ctx) {
      VS_STEP_OK(ctx.assign_add(d, 1.0));
      VS_STEP_OK(
        ctx.scatter_add(i, {0}, tensor::from_vector<int32_t>({1}, {40})));
    });
    VS_CHECK_CODE(err, overflow);
    CHECK(same(before, take_snapshot(s)));
  }
}

TEST_CASE("S1: a step's scatter moves the rows it touches, never the whole "
          "table (the variable's bytes moved)") {
  auto s = make_strategy(3);
  const auto local = static_cast<uint64_t>(s.num_local_replicas());
  constexpr int64_t rows = 10000, width = 16;
  constexpr uint64_t row_bytes = width * 4;
  auto table = make_var(s, "table", tensor::zeros(dtype::float32,
                                                  {rows, width}),
                        synchronization::on_write, aggregation::sum);
  auto moved = [&] {
    for (auto& v : VS_VALUE(s.metrics()).variables)
      if (v.name == "table")
        return v.bytes_moved;
    FAIL("no metrics for 'table'");
    return uint64_t{0};
  };
  const auto before = moved();
  // Two distinct rows per replica.
  VS_REQUIRE_OK(s.run([&](replica_context& ctx) {
    const int64_t r = ctx.replica_id();
    VS_STEP_OK(ctx.scatter_add(table, {r, 5000 + r},
                               rows_f(std::vector<float>(2 * width, 1.0f), 2,
                                      width)));
  }));
  const auto sparse = moved() - before;
  // This process's replicas' rows combined (2 each), read from each of
  // its replicas: nothing else moved.
  CHECK(sparse == 2 * local * row_bytes * local);
  CHECK(sparse < rows * row_bytes);
  VS_REQUIRE_OK(s.run([&](replica_context& ctx) {
    VS_STEP_OK(ctx.assign_add(table, tensor::zeros(dtype::float32,
                                                   {rows, width})));
  }));
  CHECK(moved() - before - sparse == rows * row_bytes * local);
  auto values = VS_VALUE(s.read(table)).to_vector<float>();
  CHECK(values[0] == 1.0f);
  CHECK(values[5000 * width] == 1.0f);
  CHECK(values[4000 * width] == 0.0f);
}

TEST_CASE("S2: scatter_min and scatter_max need aggregation none or "
          "only_first_replica on on_write variables") {
  auto s = make_strategy(2);
  auto sum = make_var(s, "sum", tensor::from_vector<float>({3}, {5, 5, 5}),
                      synchronization::on_write, aggregation::sum);
  auto first = make_var(s, "first", tensor::from_vector<float>({3}, {5, 5, 5}),
                        synchronization::on_write,
                        aggregation::only_first_replica);
  auto before = take_snapshot(s);
  auto err = s.scatter_min(sum, {{1}, rows_f({2}, 1)});
  VS_CHECK_CODE(err, invalid_argument);
  CHECK(message_of(err).find("only_first_replica") != std::string::npos);
  // The replica's error fails the step (no exception: the replica stays).
  VS_CHECK_CODE(s.run([&](replica_context& ctx) {
                  (void) ctx.scatter_max(sum, {1}, rows_f({9}, 1));
                }),
                invalid_argument);
  CHECK(same(before, take_snapshot(s)));
  // Replica 0's rows win with only_first_replica.
  VS_REQUIRE_OK(s.run([&](replica_context& ctx) {
    VS_STEP_OK(ctx.scatter_min(first, {0, 2},
                               rows_f({ctx.replica_id() == 0 ? 1.f : -9.f, 8},
                                      2)));
  }));
  for (auto& c : all_components_f(s, first))
    CHECK(c == std::vector<float>{1, 5, 5});
  VS_REQUIRE_OK(s.scatter_max(first, {{1, 2}, rows_f({9, 3}, 2)}));
  for (auto& c : all_components_f(s, first))
    CHECK(c == std::vector<float>{1, 9, 5});
  // Aggregation none: every replica must scatter equal rows (W4).
  auto none = make_var(s, "none", tensor::from_vector<float>({3}, {5, 5, 5}),
                       synchronization::on_write, aggregation::none);
  VS_REQUIRE_OK(s.run([&](replica_context& ctx) {
    VS_STEP_OK(ctx.scatter_min(none, {0, 1}, rows_f({7, 2}, 2)));
  }));
  for (auto& c : all_components_f(s, none))
    CHECK(c == std::vector<float>{5, 2, 5});
  before = take_snapshot(s);
  VS_CHECK_CODE(s.run([&](replica_context& ctx) {
                  (void) ctx.scatter_max(none, {2},
                                         rows_f({ctx.replica_id() + 6.f}, 1));
                }),
                aggregation_required);
  CHECK(same(before, take_snapshot(s)));
  VS_REQUIRE_OK(s.scatter_max(none, {{2}, rows_f({6}, 1)}));
  for (auto& c : all_components_f(s, none))
    CHECK(c == std::vector<float>{5, 2, 6});
}

TEST_CASE("S3: in replica context, scatters of on_read and none variables "
          "change the local component at once (TF refuses)") {
  auto s = make_strategy(3);
  for (auto sync : {synchronization::on_read, synchronization::none}) {
    INFO("synchronization " << to_string(sync));
    auto v = make_var(s, std::string{to_string(sync)},
                      tensor::zeros(dtype::float32, {3}), sync);
    auto seen = VS_VALUE(s.run([&](replica_context& ctx) {
      auto r = ctx.replica_id();
      VS_STEP_OK(ctx.scatter_add(v, {r}, rows_f({r + 1.f}, 1)));
      // Visible to the step at once (R2, N1).
      return VS_VALUE_IN_STEP(ctx.read_copy(v)).to_vector<float>();
    }));
    auto comps = all_components_f(s, v);
    auto expected = [](int r) {
      std::vector<float> out(3, 0);
      out[static_cast<size_t>(r)] = r + 1.f;
      return out;
    };
    for (int r = 0; r < 3; ++r)
      CHECK(comps[static_cast<size_t>(r)] == expected(r));
    // run() returns this process's replicas' results.
    for (size_t i = 0; i < seen.size(); ++i)
      CHECK(seen[i] == expected(s.first_local_replica() + static_cast<int>(i)));
  }
}

TEST_CASE("S4: cross-replica scatters follow W3, N2, R4 and R5 row by row") {
  auto s = make_strategy(3);
  SECTION("on_write and none: every component") {
    for (auto sync : {synchronization::on_write, synchronization::none}) {
      auto v = make_var(s, std::string{to_string(sync)},
                        tensor::from_vector<float>({3}, {1, 2, 3}), sync,
                        sync == synchronization::none ? aggregation::none
                                                      : aggregation::sum);
      VS_REQUIRE_OK(s.scatter_add(v, {{2, 0}, rows_f({10, 20}, 2)}));
      VS_REQUIRE_OK(s.scatter_div(v, {{1}, rows_f({4}, 1)}));
      for (auto& c : all_components_f(s, v))
        CHECK(c == std::vector<float>{21, 0.5f, 13});
    }
  }
  SECTION("on_read sum: add and sub on component 0 (R5), update split "
          "(R4), mul scales every component") {
    auto v = make_var(s, "r", tensor::from_vector<int64_t>({2}, {3, 3}),
                      synchronization::on_read, aggregation::sum);
    // Read: [9, 9].
    VS_REQUIRE_OK(s.scatter_add(v, {{1}, tensor::from_vector<int64_t>({1}, {5})}));
    CHECK(VS_VALUE(s.read(v)).to_vector<int64_t>() == std::vector<int64_t>{9, 14});
    auto comps = VS_VALUE(s.all_values(v));
    CHECK(comps[0].to_vector<int64_t>() == std::vector<int64_t>{3, 8});
    CHECK(comps[1].to_vector<int64_t>() == std::vector<int64_t>{3, 3});
    VS_REQUIRE_OK(
      s.scatter_update(v, {{0}, tensor::from_vector<int64_t>({1}, {10})}));
    CHECK(VS_VALUE(s.read(v)).to_vector<int64_t>()
          == std::vector<int64_t>{10, 14});
    comps = VS_VALUE(s.all_values(v));
    CHECK(comps[0].to_vector<int64_t>()[0] == 4); // 10 = 4 + 3 + 3
    CHECK(comps[2].to_vector<int64_t>()[0] == 3);
    VS_REQUIRE_OK(s.scatter_mul(v, {{1}, tensor::from_vector<int64_t>({1}, {2})}));
    CHECK(VS_VALUE(s.read(v)).to_vector<int64_t>()
          == std::vector<int64_t>{10, 28});
    auto before = take_snapshot(s);
    VS_CHECK_CODE(
      s.scatter_max(v, {{1}, tensor::from_vector<int64_t>({1}, {0})}),
      invalid_argument);
    CHECK(same(before, take_snapshot(s)));
  }
  SECTION("V4: an overflow on one component changes no component") {
    auto v = make_var(s, "o", tensor::from_vector<int32_t>({2}, {0, 0}),
                      synchronization::none);
    VS_REQUIRE_OK(s.run([&](replica_context& ctx) {
      if (ctx.replica_id() == 2)
        VS_STEP_OK(ctx.scatter_update(
          v, {1}, tensor::from_vector<int32_t>({1}, {2147483647})));
    }));
    auto before = take_snapshot(s);
    VS_CHECK_CODE(s.scatter_add(v, {{1}, tensor::from_vector<int32_t>({1}, {1})}),
                  overflow);
    CHECK(same(before, take_snapshot(s)));
  }
}

TEST_CASE("S5: bad scatters fail with a clear error and change nothing") {
  auto s = make_strategy(2);
  auto v = make_var(s, "tab", tensor::zeros(dtype::float32, {4, 2}),
                    synchronization::on_write, aggregation::sum);
  auto scalar = make_var(s, "scalar", tensor::scalar<float>(0),
                         synchronization::on_write, aggregation::sum);
  auto ints = make_var(s, "ints", tensor::from_vector<int32_t>({2}, {8, 8}),
                       synchronization::on_write, aggregation::none);
  auto before = take_snapshot(s);
  struct bad {
    const char* what;
    const variable* var;
    scatter_op op;
    indexed_slices slices;
    errc code;
    const char* says;
  };
  std::vector<bad> cases{
    {"index past the end", &v, scatter_op::add, {{4}, rows_f({1, 1}, 1, 2)},
     errc::invalid_argument, "index 4 at position 0 is outside [0, 4)"},
    {"negative index", &v, scatter_op::add, {{0, -1}, rows_f({1, 1, 1, 1}, 2, 2)},
     errc::invalid_argument, "index -1 at position 1"},
    {"values of the wrong row shape", &v, scatter_op::add,
     {{0}, rows_f({1, 1, 1}, 1, 3)}, errc::shape_mismatch, "[1, 2]"},
    {"fewer values than indices", &v, scatter_op::add,
     {{0, 1}, rows_f({1, 1}, 1, 2)}, errc::shape_mismatch, "2 indices"},
    {"values of another dtype", &v, scatter_op::add,
     {{0}, tensor::from_vector<double>({1, 2}, {1, 1})}, errc::dtype_mismatch,
     "float32"},
    {"a scalar variable", &scalar, scatter_op::add, {{0}, rows_f({1}, 1)},
     errc::invalid_argument, "rank >= 1"},
    {"integer division by zero", &ints, scatter_op::div,
     {{1}, tensor::from_vector<int32_t>({1}, {0})}, errc::invalid_argument,
     "division by zero"},
    {"an op outside the enum", &v, static_cast<scatter_op>(9),
     {{0}, rows_f({1, 1}, 1, 2)}, errc::invalid_argument, "scatter op 9"},
  };
  for (auto& c : cases) {
    INFO(c.what);
    auto cross = s.scatter(*c.var, c.op, c.slices);
    CHECK(has_code(cross, c.code));
    CHECK(message_of(cross).find(c.says) != std::string::npos);
    auto step = s.run([&](replica_context& ctx) {
      (void) ctx.scatter(*c.var, c.op, c.slices.indices, c.slices.values);
    });
    CHECK(has_code(step, c.code));
    CHECK(same(before, take_snapshot(s)));
  }
}

TEST_CASE("S5: bad scatters into on_read and none components in a step fail "
          "the step and change nothing") {
  auto s = make_strategy(2);
  for (auto sync : {synchronization::on_read, synchronization::none}) {
    INFO("synchronization " << to_string(sync));
    auto v = make_var(s, "local_" + std::string{to_string(sync)},
                      tensor::zeros(dtype::float32, {4, 2}), sync);
    auto before = take_snapshot(s);
    for (auto index : {int64_t{4}, int64_t{-1}}) {
      auto err = s.run([&](replica_context& ctx) {
        (void) ctx.scatter_add(v, {0, index}, rows_f({1, 1, 1, 1}, 2, 2));
      });
      CHECK(has_code(err, errc::invalid_argument));
      CHECK(message_of(err).find("index " + std::to_string(index))
            != std::string::npos);
      CHECK(same(before, take_snapshot(s)));
    }
  }
}

TEST_CASE("S5: duplicate indices in one contribution combine by the op") {
  auto s = make_strategy(2);
  auto make = [&](const char* name) {
    return make_var(s, name, tensor::from_vector<float>({3}, {8, 8, 8}),
                    synchronization::on_write,
                    aggregation::only_first_replica);
  };
  struct row {
    scatter_op op;
    std::vector<float> expected;
  };
  // Rows 0 and 2 named twice: values 2 then 4 at row 0, 1 at row 1, 0.5 then
  // 16 at row 2.
  std::vector<int64_t> idx{0, 2, 1, 0, 2};
  auto vals = rows_f({2, 0.5f, 1, 4, 16}, 5);
  int k = 0;
  for (auto& want : {row{scatter_op::add, {14, 9, 24.5f}},
                               row{scatter_op::sub, {2, 7, -8.5f}},
                               row{scatter_op::mul, {64, 8, 64}},
                               row{scatter_op::div, {1, 8, 1}},
                               row{scatter_op::min, {2, 1, 0.5f}},
                               row{scatter_op::max, {8, 8, 16}},
                               row{scatter_op::update, {4, 1, 16}}}) {
    // A copy, not a structured binding: lambdas cannot capture those
    // before Clang 16.
    const auto op = want.op;
    const auto& expected = want.expected;
    INFO(to_string(op));
    auto cross = make(("x" + std::to_string(k)).c_str());
    auto step = make(("s" + std::to_string(k++)).c_str());
    VS_REQUIRE_OK(s.scatter(cross, op, {idx, vals}));
    VS_REQUIRE_OK(s.run([&](replica_context& ctx) {
      VS_STEP_OK(ctx.scatter(step, op, idx, vals));
    }));
    for (auto* var : {&cross, &step})
      for (auto& c : all_components_f(s, *var))
        CHECK(c == expected);
  }
}

TEST_CASE("S5: scatter_mul and scatter_div apply a repeated row's factors "
          "one after another, also where their product leaves the dtype",
          "[issue34]") {
  auto s = make_strategy(2);
  struct row {
    scatter_op op;
    double start;
    double factor; // given twice, at row 0
    double expected; // TensorFlow's result
  };
  int k = 0;
  // A variable [start, 7]; the scatter names row 0 twice.
  auto check_float = [&](const row& want, synchronization sync,
                         aggregation agg, bool in_step) {
    INFO(to_string(want.op) << " " << to_string(sync) << " "
                            << to_string(agg) << (in_step ? " step" : ""));
    auto v = make_var(s, "f" + std::to_string(k++),
                      tensor::from_vector<float>(
                        {2}, {static_cast<float>(want.start), 7}),
                      sync, agg);
    const std::vector<int64_t> idx{0, 0};
    const auto f = static_cast<float>(want.factor);
    auto vals = rows_f({f, f}, 2);
    if (in_step)
      VS_REQUIRE_OK(s.run([&](replica_context& ctx) {
        VS_STEP_OK(ctx.scatter(v, want.op, idx, vals));
      }));
    else
      VS_REQUIRE_OK(s.scatter(v, want.op, {idx, vals}));
    // The kernels' float32 arithmetic, step by step.
    float seq = static_cast<float>(want.start);
    for (int i = 0; i < 2; ++i)
      seq = want.op == scatter_op::mul ? seq * f : seq / f;
    for (auto& c : all_components_f(s, v)) {
      CHECK(c[0] == seq);
      CHECK(c[0] == Approx(static_cast<float>(want.expected)).epsilon(1e-6));
      CHECK(c[1] == 7);
    }
  };
  for (auto& want : {row{scatter_op::div, 1e30, 1e25, 1e-20},
                     row{scatter_op::mul, 0, 1e30, 0},
                     row{scatter_op::mul, 1e-30, 1e25, 1e20}}) {
    check_float(want, synchronization::on_write, aggregation::sum, false);
    check_float(want, synchronization::none, aggregation::none, false);
    check_float(want, synchronization::on_write,
                aggregation::only_first_replica, true);
    check_float(want, synchronization::on_write, aggregation::none, true);
  }
  SECTION("int32: 5 / 65536 / 65536 and 0 * 65536 * 65536 are 0, not an "
          "overflow; a step that leaves int32 still is one") {
    for (auto sync : {synchronization::on_write, synchronization::none}) {
      const auto agg = sync == synchronization::none
                         ? aggregation::none
                         : aggregation::only_first_replica;
      for (auto op : {scatter_op::div, scatter_op::mul}) {
        INFO(to_string(op) << " " << to_string(sync));
        const int32_t start = op == scatter_op::div ? 5 : 0;
        auto vals = tensor::from_vector<int32_t>({2}, {65536, 65536});
        auto cross = make_var(s, "i" + std::to_string(k++),
                              tensor::from_vector<int32_t>({2}, {start, 7}),
                              sync, agg);
        VS_REQUIRE_OK(s.scatter(cross, op, {{0, 0}, vals}));
        auto step = make_var(s, "i" + std::to_string(k++),
                             tensor::from_vector<int32_t>({2}, {start, 7}),
                             sync, agg);
        VS_REQUIRE_OK(s.run([&](replica_context& ctx) {
          VS_STEP_OK(ctx.scatter(step, op, {0, 0}, vals));
        }));
        for (auto* v : {&cross, &step})
          for (auto& c : VS_VALUE(s.all_values(*v)))
            CHECK(c.to_vector<int32_t>() == std::vector<int32_t>{0, 7});
      }
      auto one = make_var(s, "i" + std::to_string(k++),
                          tensor::from_vector<int32_t>({2}, {1, 7}), sync,
                          agg);
      auto before = take_snapshot(s);
      VS_CHECK_CODE(
        s.scatter_mul(one, {{0, 0},
                            tensor::from_vector<int32_t>({2}, {65536, 65536})}),
        overflow);
      CHECK(same(before, take_snapshot(s)));
    }
  }
  SECTION("summed over replicas in a step, a replica's factors for a row "
          "combine into their product first (S1)") {
    auto v = make_var(s, "summed", tensor::from_vector<float>({2}, {1, 7}),
                      synchronization::on_write, aggregation::sum);
    VS_REQUIRE_OK(s.run([&](replica_context& ctx) {
      VS_STEP_OK(ctx.scatter_mul(v, {0, 0}, rows_f({2, 3}, 2)));
    }));
    for (auto& c : all_components_f(s, v))
      CHECK(c == std::vector<float>{12, 7}); // 1 * (2 * 3 + 2 * 3)
  }
}

TEST_CASE("S6: scatters run on every layout: a cross-replica scatter and "
          "a step's scatter") {
  auto s = make_strategy(2);
  auto v = make_var(s, "w", tensor::zeros(dtype::float32, {3}),
                    synchronization::on_write, aggregation::sum);
  VS_REQUIRE_OK(s.scatter_add(v, {{1}, rows_f({1}, 1)}));
  VS_REQUIRE_OK(s.run([&](replica_context& ctx) {
    VS_STEP_OK(ctx.scatter_add(v, {1}, rows_f({1}, 1)));
  }));
  for (auto& c : all_components_f(s, v))
    CHECK(c == std::vector<float>{0, 3, 0});
}
