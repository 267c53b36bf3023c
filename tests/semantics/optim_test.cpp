// O1-O6: optimizers (varsync/ext/optim.hpp), and W9: update_mirrored, which they
// apply their updates with. docs/semantics.md.

#include "fixture.hpp"

#include <cmath>
#include <filesystem>
#include <limits>
#include <memory>

#include "varsync/checkpoint.hpp"

#include "varsync/ext/optim.hpp"

using namespace vs_test;

namespace {

tensor vec_d(std::vector<double> values) {
  const auto n = static_cast<int64_t>(values.size());
  return tensor::from_vector<double>({n}, values);
}

std::vector<double> read_vec(const strategy& s, const variable& v) {
  return VS_VALUE(s.read(v)).to_vector<double>();
}

/// Replica r's gradient of a [2] variable: [r + 1, 2 r]. Summed over 3
/// replicas: [6, 6]; averaged: [2, 2].
tensor grad_of(int r) {
  return vec_d({r + 1.0, 2.0 * r});
}

/// One step on every replica: apply_gradients of grad_of(r) for `w`.
caf::error train_step(const strategy& s, optim::optimizer& opt,
                      const variable& w) {
  return s.run([&](replica_context& ctx) -> step_task<> {
    // GCC 12 rejects a braced list inside co_await: built first.
    std::vector<optim::gradient> grads{{w, grad_of(ctx.replica_id())}};
    auto norm = co_await opt.apply_gradients(ctx, std::move(grads));
    if (!norm)
      throw std::runtime_error(describe(norm.error()));
  });
}

void check_close(const std::vector<double>& got,
                 const std::vector<double>& want) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i)
    CHECK(got[i] == Approx(want[i]).epsilon(1e-12).margin(1e-15));
}

} // namespace

TEST_CASE("W9: update_mirrored applies replica 0's value to every component "
          "whatever the aggregation") {
  auto s = make_strategy(3);
  for (auto agg : {aggregation::sum, aggregation::mean, aggregation::none,
                   aggregation::only_first_replica}) {
    INFO("aggregation " << to_string(agg));
    auto v = make_var(s, "v" + std::string{to_string(agg)},
                      tensor::scalar<float>(1), synchronization::on_write, agg);
    VS_REQUIRE_OK(s.run([&](replica_context& ctx) {
      VS_STEP_OK(ctx.update_mirrored(v, update_op::assign,
                                     tensor::scalar<float>(0.1f)));
      VS_STEP_OK(ctx.update_mirrored(v, update_op::assign_add,
                                     tensor::scalar<float>(0.2f)));
    }));
    // Bit for bit what one replica computes, on every component.
    const float want = 0.1f + 0.2f;
    for (auto& t : VS_VALUE(s.local_values(v)))
      CHECK(t.to_vector<float>() == std::vector<float>{want});
  }
}

TEST_CASE("W9: update_mirrored needs an on_write variable, and every replica "
          "must use the same form") {
  auto s = make_strategy(2);
  auto w = make_var(s, "w", tensor::scalar<float>(1), synchronization::on_write,
                    aggregation::sum);
  auto r = make_var(s, "r", tensor::scalar<float>(1), synchronization::on_read,
                    aggregation::sum);
  VS_CHECK_CODE(s.run([&](replica_context& ctx) {
                  (void) ctx.update_mirrored(r, update_op::assign,
                                             tensor::scalar<float>(5));
                }),
                invalid_argument);
  auto err = s.run([&](replica_context& ctx) {
    auto x = tensor::scalar<float>(5);
    if (ctx.replica_id() == 0)
      (void) ctx.update_mirrored(w, update_op::assign, x);
    else
      (void) ctx.assign(w, x);
  });
  VS_CHECK_CODE(err, mismatched_replica_updates);
  CHECK(message_of(err).find("update_mirrored") != std::string::npos);
  CHECK(read_scalar(s, w) == 1);
  CHECK(read_scalar(s, r) == 2);
}

TEST_CASE("O1: build creates each slot beside its weight and the step count, "
          "as on_write only_first_replica variables of zeros") {
  auto s = make_strategy(2);
  auto w = make_var(s, "w", tensor::from_vector<float>({2, 3}, {1, 2, 3, 4, 5, 6}),
                    synchronization::on_write, aggregation::mean);
  auto b = make_var(s, "b", tensor::scalar<double>(0.5),
                    synchronization::on_write, aggregation::none);
  optim::adam opt{1e-3};
  VS_REQUIRE_OK(opt.build(s, {w, b}));
  for (auto name : {"w/m", "w/v", "b/m", "b/v"}) {
    INFO(name);
    auto v = VS_VALUE(s.lookup(name));
    CHECK(v.synchronization() == synchronization::on_write);
    CHECK(v.aggregation() == aggregation::only_first_replica);
    CHECK_FALSE(v.trainable());
    auto value = VS_VALUE(s.read(v));
    CHECK(value.type() == (name[0] == 'w' ? dtype::float32 : dtype::float64));
    CHECK(value.shape() == (name[0] == 'w' ? tensor_shape{2, 3} : tensor_shape{}));
    for (double x : value.to_vector<double>())
      CHECK(x == 0);
  }
  CHECK(opt.iterations().name() == "adam/iterations");
  CHECK(read_scalar(s, opt.iterations()) == 0);
  CHECK(VS_VALUE(opt.slot(w, "m")).name() == "w/m");
  VS_CHECK_CODE(error_of(opt.slot(w, "momentum")), invalid_argument);
  // Built already.
  VS_CHECK_CODE(opt.build(s, {w}), already_exists);
}

TEST_CASE("O1: build refuses what it cannot update and creates nothing") {
  auto s = make_strategy(2);
  auto w = make_var(s, "w", vec_d({1, 2}), synchronization::on_write,
                    aggregation::mean);
  auto r = make_var(s, "r", vec_d({1, 2}), synchronization::on_read,
                    aggregation::sum);
  auto n = make_var(s, "n", tensor::scalar<int64_t>(1),
                    synchronization::on_write, aggregation::sum);
  const auto before = VS_VALUE(s.variables()).size();
  optim::sgd momentum{0.1, 0.9};
  VS_CHECK_CODE(momentum.build(s, {w, r}), invalid_argument);
  VS_CHECK_CODE(momentum.build(s, {w, n}), invalid_argument);
  VS_CHECK_CODE(momentum.build(s, {w, w}), already_exists);
  VS_CHECK_CODE(optim::adam(1e-3, 1.0).build(s, {w}), invalid_argument);
  VS_CHECK_CODE(optim::sgd(0.1, 0, true).build(s, {w}), invalid_argument);
  VS_CHECK_CODE(optim::sgd(-1).build(s, {w}), invalid_argument);
  CHECK(VS_VALUE(s.variables()).size() == before);
  // A name taken halfway: what was created is removed again.
  make_var(s, "w/momentum", vec_d({0, 0}), synchronization::on_write,
           aggregation::mean);
  VS_CHECK_CODE(momentum.build(s, {w}), already_exists);
  CHECK(VS_VALUE(s.variables()).size() == before + 1);
  VS_CHECK_CODE(error_of(s.lookup("sgd/iterations")), unknown_variable);
}

TEST_CASE("O2: apply_gradients combines every gradient in one all_reduce and "
          "applies SGD, momentum and Nesterov alike on every replica") {
  auto s = make_strategy(3);
  struct row {
    const char* what;
    double momentum;
    bool nesterov;
  };
  int k = 0;
  for (auto each : {row{"plain", 0, false}, row{"momentum", 0.9, false},
                    row{"nesterov", 0.9, true}}) {
    INFO(each.what);
    auto w = make_var(s, "w" + std::to_string(k), vec_d({1, -1}),
                      synchronization::on_write, aggregation::mean);
    optim::optimizer_options o;
    o.name = "sgd" + std::to_string(k++);
    optim::sgd opt{0.1, each.momentum, each.nesterov, o};
    VS_REQUIRE_OK(opt.build(s, {w}));
    // Reference: the summed gradient is [6, 6] at every step.
    std::vector<double> ref{1, -1}, vel{0, 0};
    for (int step = 0; step < 3; ++step) {
      VS_REQUIRE_OK(train_step(s, opt, w));
      for (size_t i = 0; i < 2; ++i) {
        const double g = 6;
        if (each.momentum == 0) {
          ref[i] -= 0.1 * g;
        } else {
          vel[i] = each.momentum * vel[i] - 0.1 * g;
          ref[i] += each.nesterov ? each.momentum * vel[i] - 0.1 * g : vel[i];
        }
      }
    }
    check_close(read_vec(s, w), ref);
    CHECK(all_components_equal(s, w));
    CHECK(read_scalar(s, opt.iterations()) == 3);
    if (each.momentum != 0) {
      check_close(read_vec(s, VS_VALUE(opt.slot(w, "momentum"))), vel);
      // Keras' velocity is -lr times torch's buffer b = m b + g.
      double b = 0;
      for (int step = 0; step < 3; ++step)
        b = each.momentum * b + 6;
      check_close(read_vec(s, VS_VALUE(opt.slot(w, "momentum"))),
                  {-0.1 * b, -0.1 * b});
    }
  }
}

TEST_CASE("O2: Adam and AdamW follow Keras' update with bias correction") {
  auto s = make_strategy(3);
  for (double decay : {0.0, 0.004}) {
    INFO("weight decay " << decay);
    auto w = make_var(s, decay == 0 ? "wa" : "ww", vec_d({1, -1}),
                      synchronization::on_write, aggregation::mean);
    std::unique_ptr<optim::optimizer> opt;
    if (decay == 0)
      opt = std::make_unique<optim::adam>(0.01);
    else
      opt = std::make_unique<optim::adamw>(0.01, decay);
    VS_REQUIRE_OK(opt->build(s, {w}));
    std::vector<double> ref{1, -1}, m{0, 0}, v{0, 0};
    for (int t = 1; t <= 3; ++t) {
      VS_REQUIRE_OK(train_step(s, *opt, w));
      const double lr_t = 0.01 * std::sqrt(1 - std::pow(0.999, t))
                          / (1 - std::pow(0.9, t));
      for (size_t i = 0; i < 2; ++i) {
        const double g = 6;
        ref[i] -= ref[i] * decay * 0.01;
        m[i] = 0.9 * m[i] + 0.1 * g;
        v[i] = 0.999 * v[i] + 0.001 * g * g;
        ref[i] -= lr_t * m[i] / (std::sqrt(v[i]) + 1e-7);
      }
    }
    check_close(read_vec(s, w), ref);
    check_close(read_vec(s, VS_VALUE(opt->slot(w, "m"))), m);
    check_close(read_vec(s, VS_VALUE(opt->slot(w, "v"))), v);
    CHECK(all_components_equal(s, w));
  }
}

TEST_CASE("O2: the gradients of every variable travel in one collective",
          "[one-process]") {
  auto s = make_strategy(3);
  std::vector<variable> vars;
  for (int k = 0; k < 4; ++k)
    vars.push_back(make_var(s, "v" + std::to_string(k), vec_d({0, 0}),
                            synchronization::on_write, aggregation::mean));
  optim::adam opt{0.01};
  VS_REQUIRE_OK(opt.build(s, vars));
  const auto before = VS_VALUE(s.stats()).collectives_run;
  VS_REQUIRE_OK(s.run([&](replica_context& ctx) -> step_task<> {
    std::vector<optim::gradient> grads;
    for (auto& v : vars)
      grads.push_back({v, grad_of(ctx.replica_id())});
    auto norm = co_await opt.apply_gradients(ctx, std::move(grads));
    if (!norm)
      throw std::runtime_error(describe(norm.error()));
  }));
  // The gradients' all_reduce and the step's fused update of 4 weights, 8
  // slots and the step count.
  CHECK(VS_VALUE(s.stats()).collectives_run - before == 2);
}

TEST_CASE("O3: gradients combine by sum or mean and clip by their global "
          "norm") {
  auto s = make_strategy(3);
  auto w = make_var(s, "w", vec_d({0, 0}), synchronization::on_write,
                    aggregation::only_first_replica);
  auto u = make_var(s, "u", vec_d({0, 0}), synchronization::on_write,
                    aggregation::only_first_replica);
  optim::optimizer_options clipped;
  clipped.clip_global_norm = 1;
  clipped.name = "clipped";
  optim::sgd opt{1, 0, false, clipped};
  optim::optimizer_options mean;
  mean.reduction = reduce_op::mean;
  mean.name = "mean";
  optim::sgd avg{1, 0, false, mean};
  VS_REQUIRE_OK(opt.build(s, {w}));
  VS_REQUIRE_OK(avg.build(s, {u}));
  auto norms = VS_VALUE(s.run([&](replica_context& ctx) -> step_task<double> {
    auto g = grad_of(ctx.replica_id());
    std::vector<optim::gradient> for_w{{w, g}}, for_u{{u, g}};
    auto a = co_await opt.apply_gradients(ctx, std::move(for_w));
    auto b = co_await avg.apply_gradients(ctx, std::move(for_u));
    if (!a || !b)
      throw std::runtime_error("apply_gradients failed");
    co_return *a + 1000 * *b;
  }));
  // Summed [6, 6] (norm sqrt(72)) clipped to norm 1; averaged [2, 2].
  for (double x : norms.values())
    CHECK(x == Approx(std::sqrt(72.0) + 1000 * std::sqrt(8.0)));
  const double c = 6 / std::sqrt(72.0);
  check_close(read_vec(s, w), {-c, -c});
  check_close(read_vec(s, u), {-2, -2});
}

TEST_CASE("O5: with clipping, a gradient that is not finite fails the step "
          "and applies nothing, or follows TensorFlow if asked",
          "[issue34]") {
  auto s = make_strategy(2);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  int k = 0;
  for (double bad : {nan, inf}) {
    INFO("replica 0's element 1 is " << bad);
    // Replica 0: [1, bad, 1]; replica 1: [1, 1, 1]. Without the rule the
    // NaN norm switched clipping off and [1, 0.2, 0.2] would be applied.
    auto grad = [bad](int r) { return vec_d({1, r == 0 ? bad : 1.0, 1}); };
    { // fail (the default): invalid_argument naming the variable and
      // element, nothing recorded
      auto w = make_var(s, "w" + std::to_string(k), vec_d({0, 0, 0}),
                        synchronization::on_write, aggregation::mean);
      optim::sgd opt{{.learning_rate = 0.1,
                      .momentum = 0.9,
                      .common = {.name = "f" + std::to_string(k++),
                                 .clip_global_norm = 1}}};
      VS_REQUIRE_OK(opt.build(s, {w}));
      auto got = VS_VALUE(s.run([&](replica_context& ctx)
                                  -> step_task<caf::error> {
        std::vector<optim::gradient> grads{{w, grad(ctx.replica_id())}};
        auto r = co_await opt.apply_gradients(ctx, std::move(grads));
        co_return r ? caf::error{} : r.error();
      }));
      for (auto& err : got.values()) {
        CHECK(has_code(err, errc::invalid_argument));
        auto msg = message_of(err);
        CHECK(msg.find("'" + w.name() + "'") != std::string::npos);
        CHECK(msg.find(std::isnan(bad) ? "nan" : "inf")
              != std::string::npos);
        CHECK(msg.find("element 1") != std::string::npos);
      }
      check_close(read_vec(s, w), {0, 0, 0});
      check_close(read_vec(s, VS_VALUE(opt.slot(w, "momentum"))), {0, 0, 0});
      CHECK(read_scalar(s, opt.iterations()) == 0);
    }
    { // as_tensorflow: every gradient element NaN, as
      // tf.clip_by_global_norm
      auto w = make_var(s, "t" + std::to_string(k), vec_d({0, 0, 0}),
                        synchronization::on_write, aggregation::mean);
      optim::sgd opt{{.learning_rate = 0.1,
                      .common = {.name = "t" + std::to_string(k++),
                                 .clip_global_norm = 1,
                                 .nonfinite =
                                   optim::nonfinite_gradients::as_tensorflow}}};
      VS_REQUIRE_OK(opt.build(s, {w}));
      auto norms = VS_VALUE(s.run([&](replica_context& ctx)
                                    -> step_task<double> {
        std::vector<optim::gradient> grads{{w, grad(ctx.replica_id())}};
        auto r = co_await opt.apply_gradients(ctx, std::move(grads));
        if (!r)
          throw std::runtime_error(describe(r.error()));
        co_return *r;
      }));
      for (double n : norms.values())
        CHECK_FALSE(std::isfinite(n));
      for (double x : read_vec(s, w))
        CHECK(std::isnan(x));
      CHECK(read_scalar(s, opt.iterations()) == 1);
    }
  }
  { // nonfinite outside the enum is refused by build
    auto w = make_var(s, "bad_enum", vec_d({0}), synchronization::on_write,
                      aggregation::mean);
    optim::sgd opt{{.common = {.nonfinite =
                                 static_cast<optim::nonfinite_gradients>(7)}}};
    VS_CHECK_CODE(opt.build(s, {w}), invalid_argument);
  }
}

TEST_CASE("O6: optimizers take their hyperparameters by name and give what "
          "the positional constructors give", "[issue34]") {
  auto s = make_strategy(2);
  struct pair {
    std::unique_ptr<optim::optimizer> named, positional;
  };
  optim::optimizer_options clip_p{.name = "sgd_p", .clip_global_norm = 1};
  optim::optimizer_options adam_p{.name = "adam_p", .clip_global_norm = 1};
  optim::optimizer_options adamw_p{.name = "adamw_p", .clip_global_norm = 1};
  std::vector<pair> pairs;
  pairs.push_back({std::make_unique<optim::sgd>(optim::sgd_options{
                     .learning_rate = 0.1,
                     .momentum = 0.9,
                     .nesterov = true,
                     .common = {.name = "sgd_n", .clip_global_norm = 1}}),
                   std::make_unique<optim::sgd>(0.1, 0.9, true, clip_p)});
  pairs.push_back({std::make_unique<optim::adam>(optim::adam_options{
                     .learning_rate = 0.01,
                     .common = {.name = "adam_n", .clip_global_norm = 1}}),
                   std::make_unique<optim::adam>(0.01, 0.9, 0.999, 1e-7,
                                                 adam_p)});
  pairs.push_back({std::make_unique<optim::adamw>(optim::adamw_options{
                     .learning_rate = 0.01,
                     .weight_decay = 0.01,
                     .beta_2 = 0.99,
                     .common = {.name = "adamw_n", .clip_global_norm = 1}}),
                   std::make_unique<optim::adamw>(0.01, 0.01, 0.9, 0.99, 1e-7,
                                                  adamw_p)});
  int k = 0;
  for (auto& p : pairs) {
    INFO(p.named->name());
    auto a = make_var(s, "a" + std::to_string(k), vec_d({1, -1}),
                      synchronization::on_write, aggregation::mean);
    auto b = make_var(s, "b" + std::to_string(k++), vec_d({1, -1}),
                      synchronization::on_write, aggregation::mean);
    VS_REQUIRE_OK(p.named->build(s, {a}));
    VS_REQUIRE_OK(p.positional->build(s, {b}));
    for (int step = 0; step < 2; ++step) {
      VS_REQUIRE_OK(train_step(s, *p.named, a));
      VS_REQUIRE_OK(train_step(s, *p.positional, b));
    }
    CHECK(read_vec(s, a) == read_vec(s, b));
    CHECK(read_vec(s, a) != std::vector<double>{1, -1});
  }
  // Keras' defaults where nothing is named.
  optim::sgd plain{optim::sgd_options{}};
  CHECK(plain.name() == "sgd");
}

TEST_CASE("O4: apply_gradients refuses bad gradients before anything moves") {
  auto s = make_strategy(2);
  auto w = make_var(s, "w", vec_d({1, 2}), synchronization::on_write,
                    aggregation::mean);
  auto other = make_var(s, "other", vec_d({1, 2}), synchronization::on_write,
                        aggregation::mean);
  optim::sgd opt{0.1, 0.5};
  VS_REQUIRE_OK(opt.build(s, {w}));
  struct row {
    const char* what;
    std::vector<optim::gradient> grads;
    errc code;
  };
  for (auto& each :
       {row{"an unbuilt variable", {{other, vec_d({1, 1})}}, errc::invalid_argument},
        row{"two gradients of one variable",
            {{w, vec_d({1, 1})}, {w, vec_d({1, 1})}}, errc::invalid_argument},
        row{"another dtype", {{w, tensor::from_vector<float>({2}, {1, 1})}},
            errc::dtype_mismatch},
        row{"another shape", {{w, vec_d({1, 1, 1})}}, errc::shape_mismatch}}) {
    INFO(each.what);
    auto grads = each.grads;
    auto got = VS_VALUE(s.run([&opt, grads](replica_context& ctx)
                                -> step_task<caf::error> {
      auto r = co_await opt.apply_gradients(ctx, grads);
      co_return r ? caf::error{} : r.error();
    }));
    for (auto& err : got.values())
      CHECK(has_code(err, each.code));
  }
  check_close(read_vec(s, w), {1, 2});
  CHECK(read_scalar(s, opt.iterations()) == 0);
  check_close(read_vec(s, VS_VALUE(opt.slot(w, "momentum"))), {0, 0});
}

TEST_CASE("O1: slots and the step count are checkpointed with the weights") {
  namespace fs = std::filesystem;
  auto s = make_strategy(2);
  auto w = make_var(s, "w", vec_d({1, -1}), synchronization::on_write,
                    aggregation::mean);
  optim::adam opt{0.01};
  VS_REQUIRE_OK(opt.build(s, {w}));
  VS_REQUIRE_OK(train_step(s, opt, w));
  VS_REQUIRE_OK(train_step(s, opt, w));
  auto dir = fs::temp_directory_path() / ("varsync-optim-" + shared_run_id());
  fs::create_directories(dir);
  const auto path = local_file((dir / "adam.safetensors").string());
  fs::create_directories(fs::path{path}.parent_path());
  VS_REQUIRE_OK(save(s, path));
  const auto saved = take_snapshot(s);
  VS_REQUIRE_OK(train_step(s, opt, w));
  CHECK_FALSE(same(saved, take_snapshot(s)));
  VS_REQUIRE_OK(restore(s, path));
  CHECK(same(saved, take_snapshot(s)));
  CHECK(read_scalar(s, opt.iterations()) == 2);
  // Training goes on from the restored moments and step count exactly as
  // it did the first time.
  VS_REQUIRE_OK(train_step(s, opt, w));
  auto again = take_snapshot(s);
  VS_REQUIRE_OK(restore(s, path));
  VS_REQUIRE_OK(train_step(s, opt, w));
  CHECK(same(again, take_snapshot(s)));
  std::error_code ec;
  if (!across_processes())
    fs::remove_all(dir, ec);
}
