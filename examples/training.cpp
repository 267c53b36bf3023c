// training: data-parallel linear regression on 4 host replicas, the way
// tf.distribute.MirroredStrategy trains a model.
//
//  - The input: a distributed_sampler (docs/input.md) shuffles the 3003
//    rows anew every epoch (the same order in every process, without a
//    message) and hands each step's global batch of 128 rows out, 32 per
//    replica by global replica id; the last step of an epoch has the 59
//    rows left, 15 + 15 + 15 + 14 (uneven_end::partial): every row once.
//  - weights w[8] and bias b: ON_WRITE + MEAN, trained by optim::sgd. Each
//    replica sums the MSE gradient over its rows and divides by the step's
//    global row count; apply_gradients sums them over the replicas (one
//    collective for both): the exact mean over the global batch, however
//    uneven the replicas' batches. It records the same new weights on
//    every replica, so the replicas stay identical (mirrored). The
//    optimizer's step count "sgd/iterations" is a variable too, saved and
//    restored with the rest.
//  - examples_seen: ON_READ + SUM int64. Each replica counts locally, with no
//    communication; the cross-replica read is the total.
//  - loss: ON_READ + SUM float32. Each replica stores its rows' squared
//    errors over the step's global row count: the cross-replica read is the
//    step's exact mean loss.
//  - epochs_done: ON_WRITE + ONLY_FIRST_REPLICA int64, set after each epoch.
//  - data/position: the sampler's position (epoch, offset, step), recorded
//    before each save, so a resumed run continues the epoch's order.
//
// The variables are the whole training state: the batches follow from the
// sampler's position, so a run resumed from a checkpoint ends with bitwise
// the same weights as an uninterrupted one. At the end, one pass over every
// row with uneven batches gives the exact mean squared error with
// reduce(mean, per-replica errors, axis 0) (one process; across processes
// the per-replica values stay in their process, P7).
//
// Exits non-zero unless the learned parameters match the generating ones and
// the example count is exact.
//
//   training [--smoke] [--epochs N] [--checkpoint PATH] [--resume PATH]
//            [--stop-after-epoch K] [--print-weights]
//
//   --checkpoint PATH      save every variable to PATH after each epoch
//   --resume PATH          restore from PATH, continue after its last epoch
//   --stop-after-epoch K   stop (exit 0) once K epochs are done, as if killed
//   --print-weights        print the final w and b as hexfloats on one line
//
// Started by varsync-run (or torchrun, mpirun, srun with VARSYNC_RENDEZVOUS),
// the four replicas are spread over the processes and every process runs
// the same loop; the weights match the single-process run's (the example
// test compares them).
//
// Options are CAF options: --name value or --name=value; --long-help lists
// them and caf-application.ini in the working directory can set them under
// [global].

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>

#include "example_cluster.hpp"
#include "example_main.hpp"
#include "varsync/checkpoint.hpp"
#include "varsync/config.hpp"
#include "varsync/ext/input_batches.hpp"
#include "varsync/ext/optim.hpp"
#include "varsync/ext/sampler.hpp"
#include "varsync/ext/sampler_checkpoint.hpp"
#include "varsync/varsync.hpp"

using namespace varsync;

namespace {

constexpr int num_features = 8;
// Not a multiple of the global batch: the epoch ends with uneven batches.
constexpr int num_rows = 3003;
constexpr int global_batch = 128;
constexpr uint64_t shuffle_seed = 20240601;
// Feature scales 0.5 .. 1.5 make the MSE Hessian 2·diag(s²) span 0.5 .. 4.5:
// lr = 0.05 shrinks the slowest direction by 0.975 per step, 0.55 per epoch
// of 24 steps, so 8 epochs cut the initial error (at most 2) below 0.02.
constexpr float learning_rate = 0.05f;
// Noise sd 0.1 over 3003 rows leaves a statistical error of ~0.002 per
// weight: 0.05 is well clear of it, yet far below the initial error (the
// true weights are drawn from [-2, 2]), so a run that does not converge, or
// whose replicas drift apart, fails.
constexpr double tolerance = 0.05;
constexpr double noise_sd = 0.1;

struct dataset {
  std::vector<float> x; // row-major [num_rows, num_features]
  std::vector<float> y;
  std::vector<float> w_true;
  float b_true = 0;
};

dataset make_dataset() {
  std::mt19937 gen(20240601);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> uniform(-2.0f, 2.0f);
  dataset d;
  for (int j = 0; j < num_features; ++j)
    d.w_true.push_back(uniform(gen));
  d.b_true = uniform(gen);
  d.x.resize(size_t(num_rows) * num_features);
  d.y.resize(num_rows);
  for (int i = 0; i < num_rows; ++i) {
    float yi = d.b_true;
    for (int j = 0; j < num_features; ++j) {
      float scale = 0.5f + float(j) / float(num_features - 1);
      float xij = scale * normal(gen);
      d.x[size_t(i) * num_features + j] = xij;
      yi += xij * d.w_true[j];
    }
    d.y[i] = yi + float(noise_sd) * normal(gen);
  }
  return d;
}

// A replica's rows of one step, and the step's rows over every replica.
struct batch {
  std::vector<int64_t> rows;
  int64_t global_count = 0;
};

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

// An integer option not given (the values given must be positive).
constexpr int unset = -1;

struct training_options : caf::actor_system_config {
  bool smoke = false;
  int epochs = unset; // unset: the default for the mode
  std::string checkpoint;
  std::string resume;
  int stop_after = unset; // unset: never
  bool print_weights = false;
  std::vector<examples::flag> flags{{&smoke, "smoke"},
                                    {&print_weights, "print-weights"}};

  training_options() {
    register_types(*this);
    tune_scheduler(*this);
    set("logger.verbosity", caf::atom("quiet"));
    opt_group{custom_options_, "global"}
      .add<bool>("smoke", "a short run (8 epochs unless --epochs is given)")
      .add(epochs, "epochs", "number of epochs (default: 30, 8 with --smoke)")
      .add(checkpoint, "checkpoint",
           "save every variable to this path after each epoch")
      .add(resume, "resume",
           "restore from this path and continue after its last epoch")
      .add(stop_after, "stop-after-epoch",
           "stop (exit 0) once this many epochs are done, as if killed")
      .add<bool>("print-weights",
                 "print the final w and b as hexfloats on one line");
  }
};

using config = examples::config<training_options>;

bool usage(const char* msg) {
  std::fprintf(stderr,
               "training: %s\n"
               "usage: training [--smoke] [--epochs N] [--checkpoint PATH] "
               "[--resume PATH] [--stop-after-epoch K] [--print-weights] "
               "(--long-help lists every option)\n",
               msg);
  return false;
}

// The values CAF parsed, checked the way the hand-written parser did.
bool check_options(const config& cfg) {
  auto bad = [](int v) { return v != unset && (v < 1 || v > 1000000); };
  if (bad(cfg.epochs))
    return usage("--epochs needs a positive integer");
  if (bad(cfg.stop_after))
    return usage("--stop-after-epoch needs a positive integer");
  if (!cfg.remainder.empty())
    return usage(("unknown argument " + cfg.remainder.front()).c_str());
  return true;
}

// The mean squared error over every row in one step of uneven batches
// (751, 751, 751 and 750 rows): reduce(mean, ..., axis 0) is the exact mean,
// total over count (D4), equal to the host's. One process only: across
// processes each holds only its replicas' values (P7). Returns the failures.
int check_exact_mean(const strategy& s, const dataset& data, const variable& w,
                     const variable& b) {
  if (s.num_local_replicas() != s.num_replicas()) {
    std::printf("exact mean squared error: checked in one process only (P7)\n");
    return 0;
  }
  const int n = s.num_replicas();
  auto all_rows = must(input::distributed_sampler::create(
                         {.num_items = num_rows,
                          .global_batch_size = (num_rows + n) / n * n,
                          .shuffle = false, .end = input::uneven_end::partial},
                         n),
                       "create the evaluation sampler");
  must(all_rows.begin_epoch(0), "begin the evaluation");
  auto rows = must(input::next_batches(s, all_rows, [](const input::input_context& in) {
    return std::vector<int64_t>(in.items.begin(), in.items.end());
  }), "evaluation batches");
  auto errors = must(s.run([&](replica_context& ctx) {
    auto wv = ctx.read(w);
    auto bv = ctx.read(b);
    if (!wv || !bv)
      throw std::runtime_error("cannot read the weights");
    std::vector<double> sq;
    for (int64_t i : rows[ctx]) {
      double err = *bv->as<float>() - data.y[size_t(i)];
      for (int j = 0; j < num_features; ++j)
        err += double(wv->as<float>()[j]) * data.x[size_t(i) * num_features + j];
      sq.push_back(err * err);
    }
    return tensor::from_vector<double>({int64_t(sq.size())}, sq);
  }), "evaluation step");
  const double mean = must(s.reduce(reduce_op::mean, errors, 0), "reduce").as_double();
  double total = 0;
  for (const auto& t : errors)
    for (double x : t.to_vector<double>())
      total += x;
  const double host = total / num_rows;
  std::printf("exact mean squared error over %d rows in batches of", num_rows);
  for (const auto& t : errors)
    std::printf(" %lld", (long long)t.size());
  std::printf(": %.6f (host %.6f)\n", mean, host);
  if (std::fabs(mean - host) > 1e-12 * std::max(1.0, host)) {
    std::printf("FAILED  reduce(mean, axis 0) is not the exact mean\n");
    return 1;
  }
  return 0;
}

} // namespace

int caf_main(caf::actor_system& sys, const config& opt) {
  if (!check_options(opt))
    return 2;
  const int epochs = opt.epochs != unset ? opt.epochs : opt.smoke ? 8 : 30;
  const auto data = make_dataset();

  // Four replicas in all: here, or spread over the processes that
  // varsync-run (torchrun, mpirun, srun) started.
  strategy_options opts;
  opts.timeout = std::chrono::seconds(10);
  examples::spread_replicas(opts, 4);
  auto s = must(strategy::create(sys, opts), "create strategy");
  const int n = s.num_replicas();

  auto w = must(s.create_variable("w", tensor::zeros(dtype::float32, {num_features}),
                                  synchronization::on_write, aggregation::mean),
                "create w");
  auto b = must(s.create_variable("b", tensor::scalar<float>(0),
                                  synchronization::on_write, aggregation::mean),
                "create b");
  auto seen = must(s.create_variable("examples_seen", tensor::scalar<int64_t>(0),
                                     synchronization::on_read, aggregation::sum),
                   "create examples_seen");
  auto loss = must(s.create_variable("loss", tensor::scalar<float>(0),
                                     synchronization::on_read, aggregation::sum),
                   "create loss");
  auto epochs_done = must(s.create_variable("epochs_done", tensor::scalar<int64_t>(0),
                                            synchronization::on_write,
                                            aggregation::only_first_replica),
                          "create epochs_done");

  // Plain SGD on the sum of the replicas' gradients, each already divided
  // by the step's global row count.
  optim::optimizer_options sum_of_replicas;
  sum_of_replicas.reduction = reduce_op::sum;
  optim::sgd sgd{learning_rate, 0, false, sum_of_replicas};
  must(sgd.build(s, {w, b}), "build the optimizer");

  // Every process draws the same shuffles and shares (global replica ids).
  auto sampler = must(input::distributed_sampler::create(
                        {.num_items = num_rows, .global_batch_size = global_batch,
                         .seed = shuffle_seed, .end = input::uneven_end::partial},
                        n),
                      "create the sampler");
  auto position = must(input::create_position_variable(s, sampler, "data/position"),
                       "create data/position");

  std::printf("linear regression: %d rows x %d features, global batch %d "
              "(%lld per replica, the last %d rows uneven), shuffled every "
              "epoch, lr %g, %d epochs\n",
              num_rows, num_features, global_batch,
              (long long)sampler.per_replica_batch_size(),
              num_rows % global_batch, double(learning_rate), epochs);

  // restore() overwrites existing variables, so they are created first.
  int first_epoch = 1;
  if (!opt.resume.empty()) {
    must(varsync::restore(s, opt.resume), "restore checkpoint");
    auto done = must(s.read(epochs_done), "read epochs_done").to_vector<int64_t>()[0];
    if (done < 0 || done > epochs) {
      std::printf("FAILED  checkpoint %s has %lld epochs done, the run has %d\n",
                  opt.resume.c_str(), (long long)done, epochs);
      std::fflush(stdout);
      std::_Exit(1);
    }
    first_epoch = int(done) + 1;
    must(input::restore_position(s, position, sampler), "restore the sampler");
    auto c = must(s.read(seen), "read examples_seen").as_double();
    std::printf("resumed from %s: %lld epochs done, examples seen %.0f\n",
                opt.resume.c_str(), (long long)done, c);
  }

  auto rows_of = [](const input::input_context& in) {
    return batch{{in.items.begin(), in.items.end()}, in.global_count};
  };
  // This step's batches; run() blocks, so the step reads them in place.
  std::optional<input::replica_batches<batch>> batches;
  auto train_step = [&](replica_context& ctx) -> step_task<> {
    const batch& mine = (*batches)[ctx];
    // Zero-copy views of this replica's components, valid during the step.
    auto wv = ctx.read(w);
    auto bv = ctx.read(b);
    if (!wv || !bv)
      throw std::runtime_error("cannot read the weights");
    const float* wp = wv->as<float>();
    const float bias = *bv->as<float>();
    double grad[num_features] = {};
    double grad_b = 0;
    double sq = 0;
    for (int64_t i : mine.rows) {
      const float* xi = &data.x[size_t(i) * num_features];
      double err = bias - data.y[i];
      for (int j = 0; j < num_features; ++j)
        err += double(wp[j]) * xi[j];
      sq += err * err;
      for (int j = 0; j < num_features; ++j)
        grad[j] += 2 * err * xi[j];
      grad_b += 2 * err;
    }
    // Over the step's global count, not this replica's: summed over the
    // replicas, the exact mean of the global batch, however uneven.
    const double count = double(mine.global_count);
    std::vector<float> gw(num_features);
    for (int j = 0; j < num_features; ++j)
      gw[j] = float(grad[j] / count);
    // ON_READ: local to this replica, at once.
    ctx.assign_add(seen, double(mine.rows.size()));
    ctx.assign(loss, sq / count);
    // ON_WRITE: the replicas' gradients summed in one collective, the new
    // weights applied with the step.
    std::vector<optim::gradient> grads{
      {w, tensor::from_vector<float>({num_features}, gw)},
      {b, tensor::scalar<float>(float(grad_b / count))}};
    auto norm = co_await sgd.apply_gradients(ctx, std::move(grads));
    if (!norm)
      throw std::runtime_error(describe(norm.error()));
  };

  auto t0 = std::chrono::steady_clock::now();
  int steps_run = 0;
  for (int epoch = first_epoch; epoch <= epochs; ++epoch) {
    if (opt.stop_after > 0 && epoch > opt.stop_after) {
      std::printf("stopped after epoch %d\n", epoch - 1);
      s.shutdown();
      return 0;
    }
    // A new order for every epoch (a checkpoint taken inside one would
    // continue it).
    if (sampler.epoch_done())
      must(sampler.begin_epoch(epoch), "begin the epoch");
    while (!sampler.epoch_done()) {
      batches = must(input::next_batches(s, sampler, rows_of), "next batches");
      must(s.run(train_step), "training step");
      ++steps_run;
    }
    must(s.assign(epochs_done, double(epoch)), "assign epochs_done");
    must(input::record_position(s, position, sampler), "record the position");
    auto l = must(s.read(loss), "read loss").as_double();
    auto c = must(s.read(seen), "read examples_seen").as_double();
    std::printf("epoch %2d  loss %.5f  examples seen %.0f\n", epoch, l, c);
    if (!opt.checkpoint.empty())
      must(varsync::save(s, opt.checkpoint), "save checkpoint");
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("%d steps in %.3f s (%.0f us/step)\n", steps_run, secs,
              1e6 * secs / std::max(steps_run, 1));

  int failures = 0;
  auto learned = must(s.read(w), "read w").to_vector<float>();
  float learned_b = must(s.read(b), "read b").to_vector<float>()[0];
  double max_err = std::fabs(learned_b - data.b_true);
  std::printf("\n        learned   true\n");
  for (int j = 0; j < num_features; ++j) {
    std::printf("w[%d]  %8.4f %8.4f\n", j, learned[j], data.w_true[j]);
    max_err = std::max(max_err, double(std::fabs(learned[j] - data.w_true[j])));
  }
  std::printf("b     %8.4f %8.4f\n", learned_b, data.b_true);
  if (opt.print_weights) {
    // Hexfloats are exact, so two runs compare as strings.
    std::printf("weights");
    for (float x : learned)
      std::printf(" %a", double(x));
    std::printf(" b %a\n", double(learned_b));
  }
  std::printf("max abs error %.5f (tolerance %g)\n", max_err, tolerance);
  if (!(max_err < tolerance)) {
    std::printf("FAILED  the weights did not converge\n");
    ++failures;
  }

  failures += check_exact_mean(s, data, w, b);

  // Mirrored means bitwise equal on every replica (W7); local_values holds
  // this process's replicas.
  auto comps = must(s.local_values(w), "local_values w");
  for (size_t r = 1; r < comps.size(); ++r)
    if (!comps[r].bitwise_equal(comps[0])) {
      std::printf("FAILED  component %zu of w differs from component 0\n", r);
      ++failures;
    }

  auto total = must(s.read(seen), "read examples_seen").to_vector<int64_t>()[0];
  const int64_t expected = int64_t(epochs) * num_rows;
  std::printf("examples seen %lld, expected %d epochs x %d rows = %lld\n",
              (long long)total, epochs, num_rows, (long long)expected);
  if (total != expected) {
    std::printf("FAILED  wrong example count\n");
    ++failures;
  }

  // What synchronization cost (docs/metrics.md), and what the advisor
  // makes of each variable's access pattern.
  auto m = must(s.metrics(), "metrics");
  std::printf("\nmetrics (this process): %llu steps, %llu collectives, "
              "%.3f s in collectives\n",
              (unsigned long long)m.steps, (unsigned long long)m.collectives,
              m.collective_seconds);
  for (auto& v : m.variables)
    std::printf("  %-18s %-9s reads %llu+%llu updates %llu+%llu "
                "(replica+cross) bytes moved %llu wait %.4f s\n",
                v.name.c_str(), std::string{varsync::to_string(v.sync)}.c_str(),
                (unsigned long long)v.replica_reads,
                (unsigned long long)v.cross_replica_reads,
                (unsigned long long)v.replica_updates,
                (unsigned long long)v.cross_replica_updates,
                (unsigned long long)v.bytes_moved, v.waiting_seconds);
  for (auto& a : varsync::advise(m))
    std::printf("advice: %s\n", a.reason.c_str());

  s.shutdown();
  std::printf(failures ? "training: FAILED\n" : "training: converged, all checks passed\n");
  return failures ? 1 : 0;
}

VARSYNC_MAIN()
