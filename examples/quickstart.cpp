// quickstart: the varsync API in one walk-through. One variable of each
// synchronization, updated and read in cross-replica context (from main) and
// in replica context (inside run), plus errors and per-replica reductions.
// Every result is checked; the exit status is non-zero if anything is off.
//
//   quickstart [--smoke]
//
// Options are CAF options (--long-help lists them; caf-application.ini in
// the working directory can set them under [global]).

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>

#include "example_main.hpp"
#include "varsync/config.hpp"
#include "varsync/varsync.hpp"

using namespace varsync;

namespace {

int failures = 0;

// A failed varsync call ends the program: later steps depend on it.
template <class T>
T must(caf::expected<T> x, const char* what) {
  if (!x) {
    std::printf("FAILED  %s: %s\n", what, describe(x.error()).c_str());
    std::fflush(stdout);
    std::_Exit(1); // skip destructors: waiting for actors could hang
  }
  return std::move(*x);
}

void must(const caf::error& err, const char* what) {
  if (err) {
    std::printf("FAILED  %s: %s\n", what, describe(err).c_str());
    std::fflush(stdout);
    std::_Exit(1); // skip destructors: waiting for actors could hang
  }
}

std::string show(const std::vector<double>& xs) {
  std::string out = "[";
  for (size_t i = 0; i < xs.size(); ++i) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%s%g", i ? ", " : "", xs[i]);
    out += buf;
  }
  return out + "]";
}

// Compares every element of `got` with `want` (exact for the small integers
// and dyadic fractions used here, which float32 represents exactly).
void expect(const char* what, const tensor& got, const std::vector<double>& want) {
  auto g = got.to_vector<double>();
  bool ok = g.size() == want.size();
  for (size_t i = 0; ok && i < g.size(); ++i)
    ok = std::fabs(g[i] - want[i]) <= 1e-6 * (1.0 + std::fabs(want[i]));
  std::printf("  %-44s %s", what, show(g).c_str());
  if (ok) {
    std::printf("\n");
  } else {
    std::printf("   <-- WRONG, expected %s\n", show(want).c_str());
    ++failures;
  }
}

void expect_components(const char* what, const std::vector<tensor>& got,
                       const std::vector<double>& want) {
  std::vector<double> flat;
  for (auto& t : got)
    for (double x : t.to_vector<double>())
      flat.push_back(x);
  expect(what, tensor::from_vector<double>({int64_t(flat.size())}, flat), want);
}

void expect_error(const char* what, const caf::error& err, errc code) {
  if (has_code(err, code)) {
    std::printf("  %-44s error as expected: %s\n", what, describe(err).c_str());
  } else {
    std::printf("  %-44s <-- WRONG, expected error %s, got %s\n", what,
                std::string{to_string(code)}.c_str(),
                err ? describe(err).c_str() : "success");
    ++failures;
  }
}

struct quickstart_options : caf::actor_system_config {
  bool smoke = false;
  std::vector<examples::flag> flags{{&smoke, "smoke"}};

  quickstart_options() {
    register_types(*this);
    tune_scheduler(*this);
    set("logger.verbosity", caf::atom("quiet"));
    opt_group{custom_options_, "global"}.add<bool>(
      "smoke", "a short run (fewer counting steps), as in the tests");
  }
};

using config = examples::config<quickstart_options>;

} // namespace

int caf_main(caf::actor_system& sys, const config& cfg) {
  const bool smoke = cfg.smoke;

  strategy_options opts;
  opts.devices = {"cpu:0", "cpu:1", "cpu:2", "cpu:3"};
  opts.timeout = std::chrono::seconds(10);
  auto s = must(strategy::create(sys, opts), "create strategy");
  const int n = s.num_replicas();
  std::printf("%s (%d replicas)\n\n", s.description().c_str(), n);

  // One variable per synchronization.
  auto weight = must(s.create_variable("weight",
                                       tensor::from_vector<float>({3}, {1, 2, 3}),
                                       synchronization::on_write,
                                       aggregation::mean),
                     "create weight");
  auto counter = must(s.create_variable("counter", tensor::scalar<int64_t>(0),
                                        synchronization::on_read,
                                        aggregation::sum),
                      "create counter");
  auto loss = must(s.create_variable("loss", tensor::scalar<float>(0),
                                     synchronization::on_read,
                                     aggregation::mean),
                   "create loss");
  auto scratch = must(s.create_variable("scratch", tensor::scalar<float>(0),
                                        synchronization::none,
                                        aggregation::none),
                      "create scratch");
  std::printf("variables: weight (on_write, mean, float32[3]), counter "
              "(on_read, sum, int64), loss (on_read, mean, float32), scratch "
              "(none, float32)\n");
  std::printf("  trainable: weight=%d counter=%d (on_read defaults to false)\n\n",
              weight.trainable(), counter.trainable());
  if (!weight.trainable() || counter.trainable()) {
    std::printf("  <-- WRONG trainable defaults\n");
    ++failures;
  }

  // -- cross-replica context: calls from main -------------------------------
  std::printf("cross-replica context\n");
  must(s.assign(weight, tensor::from_vector<float>({3}, {0.5f, 0.5f, 0.5f})),
       "assign weight");
  expect("read(weight) after assign [.5,.5,.5]", must(s.read(weight), "read"),
         {0.5, 0.5, 0.5});

  // Integer sums split exactly: 10 over 4 replicas is 3+3+2+2 (TF truncates
  // to 2 each and loses 2).
  must(s.assign(counter, 10.0), "assign counter");
  expect_components("counter components after assign(10)",
                    must(s.local_values(counter), "local_values"), {3, 3, 2, 2});
  expect("read(counter) = sum", must(s.read(counter), "read"), {10});

  // assign_add on an on_read sum counter changes the sum by exactly x, via
  // component 0 (TF rejects cross-replica assign_add here).
  must(s.assign_add(counter, 5.0), "assign_add counter");
  expect_components("counter components after assign_add(5)",
                    must(s.local_values(counter), "local_values"), {8, 3, 2, 2});
  expect("read(counter) = sum", must(s.read(counter), "read"), {15});

  must(s.assign(loss, 2.0), "assign loss");
  expect("read(loss) = mean after assign(2)", must(s.read(loss), "read"), {2});

  must(s.assign(scratch, 1.0), "assign scratch");
  expect_components("scratch components after assign(1)",
                    must(s.local_values(scratch), "local_values"), {1, 1, 1, 1});
  expect_error("read(scratch): no cross-replica value", s.read(scratch).error(),
               errc::no_cross_replica_value);

  // -- replica context: one step on every replica ---------------------------
  std::printf("\nreplica context: run(step) on %d replicas\n", n);
  auto results = must(s.run([&](replica_context& ctx) {
    const int r = ctx.replica_id();
    // ON_WRITE updates apply when the step completes, so this still sees
    // the value from before the step.
    auto w = ctx.read(weight);
    float w0 = w ? w->as<float>()[0] : -1.0f;
    // Contribution r+1 from replica r; MEAN applies (1+2+3+4)/4 = 2.5.
    ctx.assign_add(weight, tensor::from_vector<float>(
                             {3}, std::vector<float>(3, float(r + 1))));
    ctx.assign_add(counter, double(r + 1)); // local: component r only
    ctx.assign(loss, double(r));            // local batch loss of replica r
    ctx.assign(scratch, 10.0 * r);          // private to replica r
    return tensor::from_vector<float>({2}, {w0, float(r + 1)});
  }), "run step");

  std::vector<double> seen;
  for (auto& t : results)
    seen.push_back(t.to_vector<double>()[0]);
  expect("weight[0] as read inside the step",
         tensor::from_vector<double>({int64_t(seen.size())}, seen),
         {0.5, 0.5, 0.5, 0.5});
  expect("read(weight) after step: .5 + mean(1..4)",
         must(s.read(weight), "read"), {3, 3, 3});
  expect_components("weight components (mirrored)",
                    must(s.local_values(weight), "local_values"),
                    {3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3});
  expect_components("counter components",
                    must(s.local_values(counter), "local_values"),
                    {9, 5, 5, 6});
  expect("read(counter) = 15 + 1+2+3+4", must(s.read(counter), "read"), {25});
  expect_components("loss components", must(s.local_values(loss), "local_values"),
                    {0, 1, 2, 3});
  expect("read(loss) = mean", must(s.read(loss), "read"), {1.5});
  expect_components("scratch components",
                    must(s.local_values(scratch), "local_values"),
                    {0, 10, 20, 30});

  // Replica context reads the local component r of every variable.
  auto local = must(s.run([&](replica_context& ctx) {
    std::vector<double> out;
    for (auto* v : {&weight, &counter, &loss, &scratch}) {
      auto t = ctx.read_copy(*v);
      out.push_back(t ? t->as_double(0) : -1.0);
    }
    return out;
  }), "read step");
  std::vector<double> flat;
  for (auto& xs : local)
    flat.insert(flat.end(), xs.begin(), xs.end());
  expect("in-step reads: w[0], counter, loss, scratch",
         tensor::from_vector<double>({int64_t(flat.size())}, flat),
         {3, 9, 0, 0, 3, 5, 1, 10, 3, 5, 2, 20, 3, 6, 3, 30});

  // -- per-replica values returned by run -----------------------------------
  std::printf("\nper-replica results of run: each replica returned [w0, r+1]\n");
  expect("reduce(sum)", must(s.reduce(reduce_op::sum, results), "reduce"),
         {2, 10});
  expect("reduce(mean)", must(s.reduce(reduce_op::mean, results), "reduce"),
         {0.5, 2.5});
  expect("reduce(sum, axis 0): all 8 numbers",
         must(s.reduce(reduce_op::sum, results, 0), "reduce axis"), {12});
  expect("gather(axis 0)", must(s.gather(results, 0), "gather"),
         {0.5, 1, 0.5, 2, 0.5, 3, 0.5, 4});
  auto everywhere = must(s.all_reduce(reduce_op::max, results), "all_reduce");
  expect("all_reduce(max): mirrored on every replica", everywhere.value(),
         {0.5, 4});
  // A mirrored value summed across replicas counts once per replica (TF
  // asserts here).
  expect("reduce(sum, mirrored) = N * value",
         must(s.reduce(reduce_op::sum, everywhere), "reduce mirrored"), {2, 16});

  // -- errors: reported, nothing changed -------------------------------------
  std::printf("\nerrors leave every component unchanged\n");
  expect_error("assign(weight, float64[3])",
               s.assign(weight, tensor::from_vector<double>({3}, {7, 7, 7})),
               errc::dtype_mismatch);
  expect_error("assign(weight, float32[2])",
               s.assign(weight, tensor::from_vector<float>({2}, {7, 7})),
               errc::shape_mismatch);
  expect_error("create_variable(\"counter\") again",
               s.create_variable("counter", tensor::scalar<int64_t>(0),
                                 synchronization::on_read, aggregation::sum)
                 .error(),
               errc::already_exists);
  expect_error("int64 variable with mean aggregation",
               s.create_variable("bad", tensor::scalar<int64_t>(0),
                                 synchronization::on_read, aggregation::mean)
                 .error(),
               errc::invalid_argument);
  // Replicas disagree under aggregation NONE: the step fails as a whole
  // (TF would let the replicas drift apart).
  auto plain = must(s.create_variable("plain", tensor::scalar<float>(1),
                                      synchronization::on_write,
                                      aggregation::none),
                    "create plain");
  expect_error("on_write/none step with differing values",
               s.run([&](replica_context& ctx) {
                 ctx.assign(plain, double(ctx.replica_id()));
               }),
               errc::aggregation_required);
  expect_components("plain components unchanged",
                    must(s.local_values(plain), "local_values"), {1, 1, 1, 1});
  expect_components("weight components unchanged",
                    must(s.local_values(weight), "local_values"),
                    {3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3});

  // -- sparse updates (S1): an embedding table and each replica's rows -------
  // Every replica saw ids {r, 5} in its batch and subtracts gradient rows for
  // them alone; only those rows move, combined row by row (here: mean).
  auto table = must(s.create_variable("table",
                                      tensor::zeros(dtype::float32, {6, 2}),
                                      synchronization::on_write,
                                      aggregation::mean),
                    "create table");
  must(s.run([&](replica_context& ctx) {
         std::vector<int64_t> ids{ctx.replica_id(), 5};
         auto grads = tensor::from_vector<float>({2, 2}, {1, 1, 2, 2});
         must(ctx.scatter_sub(table, ids, grads), "scatter_sub in a step");
       }),
       "sparse step");
  std::printf("\nsparse step: replica r subtracts [1, 1] at row r and [2, 2] "
              "at row 5 (mean over %d replicas)\n",
              n);
  // Rows 0..3: one replica's 1 / 4; row 4: untouched; row 5: 4 x 2 / 4.
  expect("read(table)", must(s.read(table), "read table"),
         {-0.25, -0.25, -0.25, -0.25, -0.25, -0.25, -0.25, -0.25, 0, 0, -2,
          -2});
  // From outside a step: reset row 5 everywhere; an index past the end is
  // refused and changes nothing.
  must(s.scatter_update(table, {{5}, tensor::zeros(dtype::float32, {1, 2})}),
       "scatter_update");
  expect_error("scatter_add at row 6 of a 6-row table",
               s.scatter_add(table, {{6}, tensor::zeros(dtype::float32,
                                                         {1, 2})}),
               errc::invalid_argument);
  expect("read(table) after the reset", must(s.read(table), "read table"),
         {-0.25, -0.25, -0.25, -0.25, -0.25, -0.25, -0.25, -0.25, 0, 0, 0, 0});

  // -- collectives inside a step (X1): a coroutine step -----------------------
  // Each replica's gradient is [r + 1, 1]; the step sums them, clips the sum
  // to norm 1 and applies it: the same update from every replica (mean).
  auto bias = must(s.create_variable("bias", tensor::zeros(dtype::float32, {2}),
                                     synchronization::on_write,
                                     aggregation::mean),
                   "create bias");
  auto gathered = must(s.run([&](replica_context& ctx) -> step_task<tensor> {
                     const float r = static_cast<float>(ctx.replica_id());
                     auto g = tensor::from_vector<float>({2}, {r + 1, 1});
                     auto sum = co_await ctx.all_reduce(reduce_op::sum, g);
                     auto v = sum.to_vector<float>();
                     const float norm = std::sqrt(v[0] * v[0] + v[1] * v[1]);
                     const float scale = norm > 1 ? 1 / norm : 1;
                     auto step = tensor::from_vector<float>(
                       {2}, {v[0] * scale, v[1] * scale});
                     must(ctx.assign_sub(bias, step), "assign_sub bias");
                     // Which replicas took part, in replica order.
                     auto id = tensor::from_vector<int32_t>(
                       {1}, {ctx.replica_id()});
                     co_return co_await ctx.all_gather(id);
                   }),
                   "step with collectives");
  const double a = n * (n + 1) / 2.0;
  const double norm = std::sqrt(a * a + double(n) * n);
  std::printf("\ncollectives inside a step: all_reduce of [r + 1, 1], "
              "clipped to norm 1, then all_gather of the replica ids\n");
  expect("read(bias)", must(s.read(bias), "read bias"), {-a / norm, -n / norm});
  std::vector<double> ids;
  for (int r = 0; r < n; ++r)
    ids.push_back(r);
  expect("replica 0's all_gather of the ids", gathered.values().front(), ids);
  // Replicas that reach different collectives fail the step on every
  // replica, nothing applied (TF's would wait for each other forever).
  if (n > 1) {
    expect_error("replica 0 broadcasts, the others all_reduce",
                 s.run([&](replica_context& ctx) -> step_task<> {
                   auto up = tensor::from_vector<float>({2}, {100, 100});
                   must(ctx.assign_add(bias, up), "assign_add bias");
                   auto x = tensor::scalar<float>(1);
                   if (ctx.replica_id() == 0)
                     co_await ctx.broadcast(x, 0);
                   else
                     co_await ctx.all_reduce(reduce_op::sum, x);
                 }),
                 errc::mismatched_replica_updates);
    expect("read(bias) unchanged", must(s.read(bias), "read bias"),
           {-a / norm, -n / norm});
  }

  // -- many steps: local counters never communicate ---------------------------
  const int steps = smoke ? 20 : 1000;
  auto before = must(s.read(counter), "read").to_vector<int64_t>()[0];
  for (int i = 0; i < steps; ++i)
    must(s.run([&](replica_context& ctx) { ctx.assign_add(counter, 1.0); }),
         "counting step");
  std::printf("\n%d more steps, each adding 1 per replica\n", steps);
  expect("read(counter)", must(s.read(counter), "read"),
         {double(before + int64_t(steps) * n)});

  s.shutdown();
  if (failures > 0) {
    std::printf("\nquickstart: %d check(s) FAILED\n", failures);
    return 1;
  }
  std::printf("\nquickstart: all checks passed\n");
  return 0;
}

VARSYNC_MAIN()
