// mlp: a small multilayer perceptron trained with Adam (varsync::optim) on
// any number of host replicas, in one process or spread over processes.
//
//  - The model: 4 inputs -> 16 tanh units -> 1 output, its weights ON_WRITE
//    variables with aggregation none (every replica applies the same update:
//    apply_gradients records it with update_mirrored, so no equality check
//    can fail).
//  - The input: a distributed_sampler (docs/input.md) shuffles the 1000
//    rows every epoch and hands out global batches of 64, 64 / N rows per
//    replica (N must divide 64, as TensorFlow's get_per_replica_batch_size
//    demands); the 40 rows left at the end of an epoch make a last step of
//    uneven batches (uneven_end::partial). Each global batch holds the same
//    rows whatever N: only their split among the replicas changes.
//  - Each replica computes the gradient of its rows' squared errors divided
//    by the step's global row count. apply_gradients sums them (one
//    collective for all four weight tensors): the gradient of the global
//    batch's mean loss, whatever the replica count, even in the uneven last
//    step.
//  - loss: ON_READ + SUM. Each replica adds its rows' squared errors over
//    the global row count; the cross-replica read is the batch's exact mean
//    loss.
//
// So the loss curve is the same, within float rounding, with 1 replica, 4
// replicas, or 4 replicas over 2 processes (tests/examples/mlp_curves.sh
// compares them). Exits non-zero unless the final loss is below a tenth of
// the first.
//
//   mlp [--smoke] [--replicas N] [--epochs N] [--print-losses]

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>

#include "example_cluster.hpp"
#include "example_main.hpp"
#include "varsync/config.hpp"
#include "varsync/ext/input_batches.hpp"
#include "varsync/ext/optim.hpp"
#include "varsync/ext/sampler.hpp"
#include "varsync/varsync.hpp"

using namespace varsync;

namespace {

constexpr int inputs = 4;
constexpr int hidden = 16;
constexpr int rows = 1000;
constexpr int batch = 64;
constexpr int unset = -1;

struct dataset {
  std::vector<float> x; // rows x inputs
  std::vector<float> y; // rows
};

// A smooth nonlinear target, fixed seed: every process makes the same data.
dataset make_dataset() {
  dataset d;
  std::mt19937 rng{7};
  std::uniform_real_distribution<float> u{-1.f, 1.f};
  for (int i = 0; i < rows; ++i) {
    float s = 0;
    for (int j = 0; j < inputs; ++j) {
      float v = u(rng);
      d.x.push_back(v);
      s += v * float(j + 1) / inputs;
    }
    d.y.push_back(std::sin(2 * s) + 0.5f * d.x.back() * d.x.back());
  }
  return d;
}

// Deterministic initial weights (Glorot-like uniform), the same everywhere.
tensor initial(tensor_shape shape, int fan_in, int fan_out, unsigned seed) {
  std::mt19937 rng{seed};
  const float limit = std::sqrt(6.f / float(fan_in + fan_out));
  std::uniform_real_distribution<float> u{-limit, limit};
  std::vector<float> xs(size_t(fan_in) * size_t(fan_out));
  for (auto& x : xs)
    x = u(rng);
  return tensor::from_vector<float>(std::move(shape), xs);
}

struct mlp_options : caf::actor_system_config {
  bool smoke = false;
  bool print_losses = false;
  int replicas = 4;
  int epochs = unset;
  std::vector<examples::flag> flags{{&smoke, "smoke"},
                                    {&print_losses, "print-losses"}};

  mlp_options() {
    register_types(*this);
    tune_scheduler(*this);
    set("logger.verbosity", caf::atom("quiet"));
    opt_group{custom_options_, "global"}
      .add<bool>("smoke", "a short run (5 epochs unless --epochs is given)")
      .add(replicas, "replicas",
           "host replicas in all (default 4; they must divide the batch of 64)")
      .add(epochs, "epochs", "number of epochs (default: 40, 5 with --smoke)")
      .add<bool>("print-losses", "print every step's loss (9 significant digits)");
  }
};

using config = examples::config<mlp_options>;

template <class T>
T must(caf::expected<T> x, const char* what) {
  if (!x) {
    std::printf("FAILED  %s: %s\n", what, describe(x.error()).c_str());
    std::fflush(stdout);
    std::_Exit(1);
  }
  return std::move(*x);
}

void must(const caf::error& err, const char* what) {
  if (err) {
    std::printf("FAILED  %s: %s\n", what, describe(err).c_str());
    std::fflush(stdout);
    std::_Exit(1);
  }
}

} // namespace

int caf_main(caf::actor_system& sys, const config& opt) {
  if (opt.replicas < 1 || opt.replicas > 64 || !opt.remainder.empty()
      || (opt.epochs != unset && (opt.epochs < 1 || opt.epochs > 100000))) {
    std::fprintf(stderr, "usage: mlp [--smoke] [--replicas N (1..64, dividing 64)] "
                         "[--epochs N] [--print-losses]\n");
    return 2;
  }
  const int epochs = opt.epochs != unset ? opt.epochs : opt.smoke ? 5 : 40;
  const auto data = make_dataset();

  strategy_options opts;
  opts.timeout = std::chrono::seconds(10);
  examples::spread_replicas(opts, opt.replicas);
  auto s = must(strategy::create(sys, opts), "create strategy");
  const int n = s.num_replicas();

  auto weight = [&](const char* name, tensor init) {
    return must(s.create_variable(name, std::move(init),
                                  synchronization::on_write, aggregation::none),
                name);
  };
  auto w1 = weight("w1", initial({inputs, hidden}, inputs, hidden, 1));
  auto b1 = weight("b1", tensor::zeros(dtype::float32, {hidden}));
  auto w2 = weight("w2", initial({hidden, 1}, hidden, 1, 2));
  auto b2 = weight("b2", tensor::zeros(dtype::float32, {1}));
  auto loss = must(s.create_variable("loss", tensor::scalar<float>(0),
                                     synchronization::on_read, aggregation::sum),
                   "create loss");
  optim::adam adam{0.05};
  must(adam.build(s, {w1, b1, w2, b2}), "build adam");
  // The same shuffles and global batches in every process and for every
  // replica count; a count that does not divide the batch is refused here.
  auto sampler = must(input::distributed_sampler::create(
                        {.num_items = rows, .global_batch_size = batch, .seed = 7,
                         .end = input::uneven_end::partial},
                        n),
                      "create the sampler");
  std::printf("mlp %d-%d-1, %d rows, shuffled batches of %d over %d "
              "replica(s), the last %d rows uneven, Adam, %d epochs\n",
              inputs, hidden, rows, batch, n, rows % batch, epochs);

  struct rows_of_step {
    std::vector<int64_t> rows;
    int64_t global_count;
  };
  // This step's batches; run() blocks, so the step reads them in place.
  std::optional<input::replica_batches<rows_of_step>> batches;
  auto train_step = [&](replica_context& ctx) -> step_task<> {
    const rows_of_step& mine = (*batches)[ctx];
    const double global_count = double(mine.global_count);
    auto W1 = ctx.read(w1), B1 = ctx.read(b1), W2 = ctx.read(w2),
         B2 = ctx.read(b2);
    if (!W1 || !B1 || !W2 || !B2)
      throw std::runtime_error("cannot read the weights");
    const float* pw1 = W1->as<float>();
    const float* pb1 = B1->as<float>();
    const float* pw2 = W2->as<float>();
    const float bias2 = *B2->as<float>();
    std::vector<double> gw1(inputs * hidden), gb1(hidden), gw2(hidden);
    double gb2 = 0, sq = 0;
    for (int64_t i : mine.rows) {
      const float* xi = &data.x[size_t(i) * inputs];
      double h[hidden];
      double out = bias2;
      for (int k = 0; k < hidden; ++k) {
        double z = pb1[k];
        for (int j = 0; j < inputs; ++j)
          z += double(xi[j]) * pw1[j * hidden + k];
        h[k] = std::tanh(z);
        out += h[k] * pw2[k];
      }
      const double err = out - data.y[i];
      sq += err * err;
      // d(err^2 / global_count) / d(out)
      const double dout = 2 * err / global_count;
      gb2 += dout;
      for (int k = 0; k < hidden; ++k) {
        gw2[k] += dout * h[k];
        const double dz = dout * pw2[k] * (1 - h[k] * h[k]);
        gb1[k] += dz;
        for (int j = 0; j < inputs; ++j)
          gw1[j * hidden + k] += dz * xi[j];
      }
    }
    ctx.assign_add(loss, sq / global_count);
    auto as_tensor = [](const std::vector<double>& g, tensor_shape shape) {
      return tensor::from_vector<float>(std::move(shape),
                                        std::vector<float>(g.begin(), g.end()));
    };
    std::vector<optim::gradient> grads{
      {w1, as_tensor(gw1, {inputs, hidden})},
      {b1, as_tensor(gb1, {hidden})},
      {w2, as_tensor(gw2, {hidden, 1})},
      {b2, as_tensor({gb2}, {1})}};
    auto norm = co_await adam.apply_gradients(ctx, std::move(grads));
    if (!norm)
      throw std::runtime_error(describe(norm.error()));
  };

  auto rows_of = [](const input::input_context& in) {
    return rows_of_step{{in.items.begin(), in.items.end()}, in.global_count};
  };
  double first_loss = -1, last_loss = -1;
  int step = 0; // over every epoch
  for (int epoch = 1; epoch <= epochs; ++epoch) {
    must(sampler.begin_epoch(epoch), "begin the epoch");
    double loss_sum = 0;
    int steps_in_epoch = 0;
    for (; !sampler.epoch_done(); ++step, ++steps_in_epoch) {
      batches = must(input::next_batches(s, sampler, rows_of), "next batches");
      must(s.assign(loss, 0.0), "reset loss");
      must(s.run(train_step), "training step");
      const double l = must(s.read(loss), "read loss").as_double();
      if (opt.print_losses)
        std::printf("loss %d %.9e\n", step, l);
      if (first_loss < 0)
        first_loss = l;
      last_loss = l;
      loss_sum += l;
    }
    std::printf("epoch %2d  loss %.6f\n", epoch, loss_sum / steps_in_epoch);
  }
  const auto steps = must(s.read(adam.iterations()), "read iterations")
                       .as_double();
  std::printf("%g Adam steps, first batch loss %.6f, last %.6f\n", steps,
              first_loss, last_loss);
  s.shutdown();
  if (!(last_loss < first_loss / 10) || steps != step) {
    std::printf("mlp: FAILED to converge\n");
    return 1;
  }
  std::printf("mlp: converged\n");
  return 0;
}

VARSYNC_MAIN()
