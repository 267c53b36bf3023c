// Optimizers (O2): one training step with optim::adam's apply_gradients
// (its gradient all_reduce inside the step, the update on every replica,
// the fused apply of weights and slots) against a hand-written fused loop:
// the same Adam update of the same parameters in one pass over float32
// arrays on one thread, with the replicas' gradients summed first: what one
// replica's share of the work costs without varsync. Both are medians of
// wall time; the ratio is the optimizer step's over the loop's.
//
//   optimizer [--quick] [--json FILE]

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include <caf/actor_system.hpp>

#include "bench/caf_setup.hpp"
#include "bench/common.hpp"
#include "varsync/ext/optim.hpp"
#include "varsync/varsync.hpp"

using namespace varsync;
using bench::clock_type;

namespace {

// Adam on float32 arrays, one pass: the loop a user would write by hand.
void fused_adam(float* w, float* m, float* v, const float* const* grads,
                int replicas, int64_t n, int64_t t) {
  const float b1 = 0.9f, b2 = 0.999f, eps = 1e-7f, lr = 1e-3f;
  const float lr_t = lr * std::sqrt(1 - std::pow(b2, float(t)))
                     / (1 - std::pow(b1, float(t)));
  for (int64_t i = 0; i < n; ++i) {
    float g = 0;
    for (int r = 0; r < replicas; ++r)
      g += grads[r][i];
    m[i] += (g - m[i]) * (1 - b1);
    v[i] += (g * g - v[i]) * (1 - b2);
    w[i] -= lr_t * m[i] / (std::sqrt(v[i]) + eps);
  }
}

bool run_all(caf::actor_system& sys, bench::recorder& rec, bool quick) {
  for (int replicas : {1, 4}) {
    for (int64_t params : {int64_t{1} << 10, int64_t{1} << 20}) {
      strategy_options options;
      options.devices = bench::host_devices(replicas);
      auto s = strategy::create(sys, options);
      if (!s) {
        std::fprintf(stderr, "%s\n", describe(s.error()).c_str());
        return false;
      }
      auto w = s->create_variable("w", tensor::zeros(dtype::float32, {params}),
                                  synchronization::on_write, aggregation::none);
      if (!w) {
        std::fprintf(stderr, "%s\n", describe(w.error()).c_str());
        return false;
      }
      optim::adam opt{1e-3};
      if (auto err = opt.build(*s, {*w})) {
        std::fprintf(stderr, "%s\n", describe(err).c_str());
        return false;
      }
      std::vector<tensor> grads;
      for (int r = 0; r < replicas; ++r)
        grads.push_back(tensor::filled(dtype::float32, {params}, 1e-3 * (r + 1)));
      const int reps = quick ? 5 : (params > 4096 ? 15 : 200);
      auto step = bench::time_ok_seconds(
        reps, 2,
        [&] {
          return s->run([&](replica_context& ctx) -> step_task<> {
            std::vector<optim::gradient> mine{
              {*w, grads[static_cast<size_t>(ctx.replica_id())]}};
            auto norm = co_await opt.apply_gradients(ctx, std::move(mine));
            if (!norm)
              throw std::runtime_error(describe(norm.error()));
          });
        },
        "optimizer step");
      std::vector<float> ww(static_cast<size_t>(params)), m(ww.size()),
        v(ww.size());
      std::vector<const float*> gp;
      for (auto& g : grads)
        gp.push_back(g.data<float>());
      int64_t t = 0;
      auto loop = bench::time_ok_seconds(
        reps, 2,
        [&] {
          fused_adam(ww.data(), m.data(), v.data(), gp.data(), replicas,
                     params, ++t);
          return false;
        },
        "fused loop");
      if (!step || !loop)
        return false;
      std::printf("optimizer %d replica(s), %8lld params: adam step %10.1f us, "
                  "hand-written fused loop %9.1f us (checksum %g), ratio %6.1f\n",
                  replicas, static_cast<long long>(params), step->median * 1e6,
                  loop->median * 1e6, double(ww[0]), step->median / loop->median);
      std::fflush(stdout);
      auto tag = ".r" + std::to_string(replicas) + "."
                 + (params > 4096 ? "1m" : "1k");
      rec.seconds("optimizer.adam_step" + tag, *step);
      rec.seconds("optimizer.fused_loop" + tag, *loop);
      s->shutdown();
    }
  }
  return true;
}

} // namespace

int main(int argc, char** argv) {
  auto opt = bench::parse_options(argc, argv);
  bench::recorder rec{opt.json};
  caf::actor_system_config cfg;
  bench::configure(cfg);
  caf::actor_system sys{cfg};
  return run_all(sys, rec, opt.quick) ? 0 : 1;
}
