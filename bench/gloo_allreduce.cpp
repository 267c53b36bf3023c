// Cross-process all-reduce through the Gloo transport (issue 12, item 7's
// first row): varsync's gloo_group::all_reduce against a bare Gloo allreduce
// on the same buffers, in the same processes, over the same kind of context
// (TCP on loopback, joined through the same rendezvous store), float32 sum,
// 4 KiB .. 256 MiB (--quick: .. 4 MiB).
//
//   gloo_allreduce [--quick] [--json FILE] [--processes N]
//
// The program starts N ranks of itself (default 2) and hosts their
// rendezvous store; rank 0 prints the table and writes the records. The
// figures are medians over the iterations (each a collective, so the ranks
// stay in step). Throughput ratio = bare time / varsync time (target >= 0.9
// from 1 MiB; printed, never asserted).

#include "bench/common.hpp"
#include "bench/process_ranks.hpp"

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>


#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/io/middleman.hpp>
#include <caf/send.hpp>
#include <gloo/allreduce.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/transport/tcp/device.h>

#include "actors/cluster/rendezvous_store_actor.hpp"
#include "sync/gloo/control_store.hpp"
#include "sync/gloo/gloo_group.hpp"
#include "varsync/config.hpp"
#include "varsync/error.hpp"

using namespace varsync;

namespace {

void configure(caf::actor_system_config& cfg) {
  register_types(cfg);
  cfg.load<caf::io::middleman>();
  cfg.set("scheduler.max-threads", 2);
  cfg.set("logger.verbosity", caf::atom("quiet"));
  // As the strategy's own systems: idle workers wait on their condition
  // variable instead of waking every 50 us (noise on 2 cores, and a bare
  // CAF reference slower than the library's own control plane).
  tune_scheduler(cfg);
}

int run_rank(uint16_t port, int rank, int size, bool quick,
             const std::string& json) {
  caf::actor_system_config cfg;
  configure(cfg);
  caf::actor_system sys{cfg};
  auto store = sys.middleman().remote_actor<rendezvous_store_actor>(
    "127.0.0.1", port);
  if (!store) {
    std::fprintf(stderr, "rank %d: no store\n", rank);
    return 1;
  }
  const std::chrono::milliseconds timeout{60000};
  gloo_group_options opts;
  opts.rank = rank;
  opts.size = size;
  opts.timeout = timeout;
  auto group = gloo_group::join(sys, *store, opts);
  if (!group) {
    std::fprintf(stderr, "rank %d: %s\n", rank,
                 describe(group.error()).c_str());
    return 1;
  }
  // The bare baseline: its own context, joined the same way.
  gloo::transport::tcp::attr attr;
  attr.hostname = "127.0.0.1";
  auto device = gloo::transport::tcp::CreateDevice(attr);
  control_store kv{sys, *store, "bare/", timeout};
  auto bare = std::make_shared<gloo::rendezvous::Context>(rank, size);
  bare->setTimeout(timeout);
  bare->connectFullMesh(kv, device);

  bench::recorder rec{rank == 0 ? json : std::string{}};
  if (rank == 0)
    std::printf("%d processes on loopback, float32 sum, in place\n"
                "      size   varsync us      bare us  varsync MB/s  "
                "throughput vs bare  target (>=0.9 from 1 MiB)\n",
                size);
  const size_t max_bytes = quick ? (size_t{4} << 20) : (size_t{256} << 20);
  std::vector<float> buf(max_bytes / sizeof(float), 1.0f);
  for (size_t bytes = 4096; bytes <= max_bytes; bytes *= 4) {
    const size_t n = bytes / sizeof(float);
    const int iters = bytes >= (size_t{64} << 20) ? 5 : bytes >= (1 << 20) ? 10
                                                                           : 50;
    std::vector<double> ours, theirs;
    for (int it = 0; it < iters + 2; ++it) { // 2 warm-ups each
      auto t0 = bench::clock_type::now();
      if (auto err = (*group)->all_reduce(reduce_op::sum, dtype::float32,
                                          buf.data(),
                                          static_cast<int64_t>(n))) {
        std::fprintf(stderr, "rank %d: %s\n", rank, describe(err).c_str());
        return 1;
      }
      double a = bench::micros_since(t0);
      t0 = bench::clock_type::now();
      gloo::AllreduceOptions o{bare};
      o.setOutput(buf.data(), n);
      o.setReduceFunction(
        static_cast<void (*)(void*, const void*, const void*, size_t)>(
          &gloo::sum<float>));
      o.setTag(1);
      gloo::allreduce(o);
      double b = bench::micros_since(t0);
      if (it >= 2) {
        ours.push_back(a);
        theirs.push_back(b);
      }
      // Keep the values small: they double with every sum.
      std::fill(buf.begin(), buf.begin() + static_cast<long>(n), 1.0f);
    }
    auto s_ours = bench::summarize(ours);
    auto s_theirs = bench::summarize(theirs);
    double ratio = s_theirs.median / s_ours.median;
    if (rank == 0) {
      std::printf("%10s %12.1f %12.1f %13.1f %19.2f  %s\n",
                  bench::size_name(bytes).c_str(), s_ours.median,
                  s_theirs.median,
                  static_cast<double>(bytes) / s_ours.median, ratio,
                  bytes < (1 << 20) ? "-" : ratio >= 0.9 ? "pass" : "MISS");
      std::string key = "gloo.p" + std::to_string(size) + ".s"
                        + std::to_string(bytes);
      rec.latency(key + ".varsync", s_ours);
      rec.latency(key + ".bare", s_theirs);
    }
  }
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  // A rank: gloo_allreduce --rank R --size P --port X [--quick] [--json F]
  if (argc >= 7 && std::string{argv[1]} == "--rank") {
    int rank = std::atoi(argv[2]);
    int size = std::atoi(argv[4]);
    auto port = static_cast<uint16_t>(std::atoi(argv[6]));
    bool quick = false;
    std::string json;
    for (int i = 7; i < argc; ++i) {
      std::string a = argv[i];
      if (a == "--quick")
        quick = true;
      else if (a == "--json" && i + 1 < argc)
        json = argv[++i];
    }
    return run_rank(port, rank, size, quick, json);
  }
  int processes = 2;
  std::vector<std::string> passthrough;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--processes" && i + 1 < argc)
      processes = std::atoi(argv[++i]);
    else if (a == "--quick")
      passthrough.push_back(a);
    else if (a == "--json" && i + 1 < argc) {
      passthrough.push_back(a);
      passthrough.push_back(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: gloo_allreduce [--quick] [--json FILE] "
                           "[--processes N]\n");
      return 2;
    }
  }
  if (processes < 2) {
    std::fprintf(stderr, "gloo_allreduce: --processes must be >= 2\n");
    return 2;
  }
  caf::actor_system_config cfg;
  configure(cfg);
  caf::actor_system sys{cfg};
  auto store = spawn_rendezvous_store(sys);
  auto port = sys.middleman().publish(store, 0, "127.0.0.1");
  if (!port) {
    std::fprintf(stderr, "gloo_allreduce: cannot publish the store\n");
    return 1;
  }
  int rc = bench::run_ranks(processes, "gloo_allreduce", [&](int r) {
    std::vector<std::string> args{"--rank", std::to_string(r), "--size",
                                  std::to_string(processes), "--port",
                                  std::to_string(*port)};
    args.insert(args.end(), passthrough.begin(), passthrough.end());
    return args;
  });
  caf::anon_send_exit(store, caf::exit_reason::user_shutdown);
  return rc;
}
