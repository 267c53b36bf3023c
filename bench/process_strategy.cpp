// A strategy across processes on loopback (issue 12, item 7): one replica
// per process, N processes.
//
//  - step rows: a replica step that contributes S bytes of float32 to an
//    ON_WRITE + SUM variable (the whole fused step: agreement, all-reduce,
//    apply) against a bare Gloo allreduce of the same size in the same
//    processes, 4 KiB .. 64 MiB (--quick: .. 1 MiB). Throughput ratio =
//    bare time / step time (target >= 0.9 from 1 MiB). Also against the
//    step's floor, timed in the same processes: the bare allreduce plus one
//    small round (the agreement) plus the two memory passes a step makes
//    besides Gloo's (copy into the pack, add into the component). Processes
//    on one host move a step's data through shared memory, not Gloo: the
//    step is also timed against a bare all-reduce of its transport (a
//    shared_memory_group of the bench's own, same buffer size), timed as
//    the MPI peer (bench/peers/mpi_allreduce.c) times MPI_Allreduce: the
//    ranks meet first, awake, and a call's time is the slowest rank's. And
//    streamed: calls back to back, per call (the transport's own cost, once
//    no rank waits for a peer that the scheduler has yet to run; on a host
//    whose cores the threads of several processes share, that wake-up, not
//    the transport, is most of a single small call). The step and its
//    transport are timed first, the bare Gloo calls after them: a socket's
//    wake-up can leave the processes on one core for milliseconds.
//  - small operations: a cross-replica scalar assign and an ON_READ + SUM
//    scalar read, against the floor the issue names: a bare CAF remote
//    request/response (process 1 to an echo actor in process 0) plus one
//    bare Gloo 4-byte allreduce (target: within 1.5x). In training mode
//    every process issues them; in services mode one process does, alone:
//    from process 0 (where the sequencer is) and from process 1 (one
//    remote round trip to the sequencer more).
//  - services throughput: async scalar assigns kept 16 in flight from
//    process 0 alone, then from every process at once (16 each; the
//    slowest process's time over all of them), per assign, against one
//    blocking assign at a time from process 0.
//
//   process_strategy [--quick] [--json FILE] [--processes N]
//
// The program starts N copies of itself; process 0 prints the table and
// writes the records. Figures are medians; nothing is asserted.

#include "bench/common.hpp"
#include "bench/process_ranks.hpp"

#include <algorithm>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <csignal>
#include <stdexcept>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>


#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/io/middleman.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>
#include <gloo/allreduce.h>
#include <gloo/broadcast.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/transport/tcp/device.h>

#include "actors/cluster/rendezvous_store_actor.hpp"
#include "sync/gloo/control_store.hpp"
#include "sync/gloo/gloo_group.hpp"
#include "sync/shm/shared_memory_group.hpp"
#include "varsync/config.hpp"
#include "varsync/varsync.hpp"

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

// Microseconds of one step that adds `grad` to each of `vars`; -1 (the
// error printed) if it failed.
double timed_step(strategy& s, const std::vector<variable>& vars,
                  const tensor& grad, int rank) {
  auto t0 = bench::clock_type::now();
  auto err = s.run([&](replica_context& ctx) {
    for (auto& v : vars)
      if (auto e = ctx.assign_add(v, grad))
        throw std::runtime_error(describe(e));
  });
  double took = bench::micros_since(t0);
  if (err) {
    std::fprintf(stderr, "rank %d: %s\n", rank, describe(err).c_str());
    return -1;
  }
  return took;
}

caf::behavior echo(caf::event_based_actor*) {
  return {[](int32_t x) { return x; }};
}

struct bare_gloo {
  std::shared_ptr<gloo::transport::Device> device;
  std::shared_ptr<gloo::rendezvous::Context> context;
  uint32_t tag = 1;

  void all_reduce(float* data, size_t n) {
    gloo::AllreduceOptions o{context};
    o.setOutput(data, n);
    o.setReduceFunction(
      static_cast<void (*)(void*, const void*, const void*, size_t)>(
        &gloo::sum<float>));
    o.setTag(tag);
    gloo::allreduce(o);
  }

  void broadcast(void* data, size_t bytes, int root) {
    gloo::BroadcastOptions o{context};
    o.setOutput(static_cast<uint8_t*>(data), bytes);
    o.setRoot(root);
    o.setTag(tag + 1);
    gloo::broadcast(o);
  }
};

// One replica here, in a strategy over `size` processes.
strategy_options one_replica_across(int rank, int size, uint16_t port,
                                    cluster_mode mode,
                                    const std::string& group) {
  strategy_options opts;
  opts.devices = {"cpu:0"};
  opts.scheduler_threads = 2;
  opts.timeout = std::chrono::seconds(60);
  cluster_spec spec;
  spec.rank = rank;
  spec.world_size = size;
  spec.rendezvous_port = port;
  spec.operation_timeout = std::chrono::milliseconds{60000};
  spec.group_name = group;
  spec.mode = mode;
  opts.cluster = spec;
  return opts;
}

// Microseconds per assign of `total` async scalar assigns to `x`, kept
// `depth` in flight from this process (0 on a failure).
double services_burst_us(const strategy& s, const variable& x, int total,
                         int depth) {
  auto api = s.async();
  std::mutex mtx;
  std::condition_variable cv;
  int issued = 0;
  int done = 0;
  bool failed = false;
  std::function<void()> issue_one;
  issue_one = [&] {
    api.assign(x, 1.0, [&](caf::error err) {
      std::lock_guard<std::mutex> lock{mtx};
      failed = failed || static_cast<bool>(err);
      ++done;
      if (issued < total) {
        ++issued;
        issue_one();
      }
      cv.notify_all();
    });
  };
  auto t0 = bench::clock_type::now();
  {
    std::lock_guard<std::mutex> lock{mtx};
    for (; issued < std::min(depth, total); ++issued)
      issue_one();
  }
  std::unique_lock<std::mutex> lock{mtx};
  cv.wait(lock, [&] { return done == total; });
  auto us = std::chrono::duration<double, std::micro>(bench::clock_type::now()
                                                       - t0)
              .count();
  return failed ? 0 : us / total;
}

// Services mode's throughput with callers in flight together: process 0
// alone with 16 assigns in flight, then every process at once with 16 each
// (the slowest process's time for all of them). Per assign, in us.
bool services_throughput(const strategy& s, const variable& x,
                         bare_gloo& bare, int rank, int size, int iters,
                         const std::string& prefix, bench::recorder& rec) {
  const int total = std::max(iters, 64) * 4;
  float one = 1;
  double alone = 0;
  if (rank == 0)
    alone = services_burst_us(s, x, total, 16);
  bare.all_reduce(&one, 1);
  const auto t0 = bench::clock_type::now();
  const double mine = services_burst_us(s, x, total, 16);
  // Every process's own time; the slowest ends the round.
  std::vector<float> each(static_cast<size_t>(size), 0.0f);
  each[static_cast<size_t>(rank)] = static_cast<float>(
    std::chrono::duration<double, std::micro>(bench::clock_type::now() - t0)
      .count());
  bare.all_reduce(each.data(), each.size());
  const float took = *std::max_element(each.begin(), each.end());
  float ok = mine > 0 && (rank != 0 || alone > 0) ? 0 : 1;
  bare.all_reduce(&ok, 1);
  if (ok > 0)
    return true;
  if (rank == 0) {
    const double together = took / (static_cast<double>(total) * size);
    std::printf("  services throughput: from process 0 with 16 in flight "
                "%.1f us per assign; from all %d processes, 16 in flight "
                "each, %.1f us per assign (all together)\n",
                alone, size, together);
    bench::stats st;
    st.n = static_cast<size_t>(total);
    st.median = st.min = st.p99 = alone;
    rec.latency(prefix + ".services.p0.assign16", st);
    st.n = static_cast<size_t>(total) * static_cast<size_t>(size);
    st.median = st.min = st.p99 = together;
    rec.latency(prefix + ".services.all.assign16", st);
  }
  return false;
}

// Services mode (P2): a second strategy over the same processes; process 0
// creates the variables, then process 1 alone and process 0 alone time
// scalar assigns and ON_READ sum reads while the others only apply them.
// Returns true on a failure.
bool services_rows(caf::actor_system& sys, bare_gloo& bare, int rank,
                   int size, int iters, double floor,
                   const std::string& prefix, bench::recorder& rec) {
  int32_t port = rank == 0 ? bench::free_loopback_port() : 0;
  bare.broadcast(&port, sizeof(port), 0);
  if (port == 0)
    return true;
  auto s = strategy::create(
    sys, one_replica_across(rank, size, static_cast<uint16_t>(port),
                            cluster_mode::services, "services"));
  if (!s) {
    std::fprintf(stderr, "rank %d: services: %s\n", rank,
                 describe(s.error()).c_str());
    return true;
  }
  bool failed = false;
  if (rank == 0)
    failed = !s->create_variable("x", tensor::scalar<float>(0),
                                 synchronization::on_write, aggregation::sum)
             || !s->create_variable("c", tensor::scalar<float>(0),
                                    synchronization::on_read,
                                    aggregation::sum);
  float one = 1;
  bare.all_reduce(&one, 1); // created before anyone looks
  auto x = s->lookup("x");
  auto c = s->lookup("c");
  if (!x || !c)
    return true;
  // [assign median, read median] as measured by process 1, then process 0.
  double figures[2][2] = {{0, 0}, {0, 0}};
  for (int who : {1, 0}) {
    if (rank == who) {
      auto assign = bench::time_calls_us(iters, 20, [&] {
        if (s->assign(*x, 1.0))
          failed = true;
      });
      auto read = bench::time_calls_us(iters, 20, [&] {
        if (!s->read(*c))
          failed = true;
      });
      figures[who][0] = assign.median;
      figures[who][1] = read.median;
      if (rank == 0) {
        rec.latency(prefix + ".services.p0.assign", assign);
        rec.latency(prefix + ".services.p0.read", read);
      }
    }
    bare.all_reduce(&one, 1); // the others wait here, applying
  }
  bare.broadcast(figures[1], sizeof(figures[1]), 1);
  if (rank == 0) {
    std::printf("\nservices mode, one process issues (median us; floor "
                "%.1f):\n",
                floor);
    for (int who : {0, 1})
      std::printf("  from process %d: scalar assign %8.1f (%.2fx floor), "
                  "ON_READ sum read %8.1f (%.2fx floor)  %s\n",
                  who, figures[who][0], figures[who][0] / floor,
                  figures[who][1], figures[who][1] / floor,
                  std::max(figures[who][0], figures[who][1]) <= 1.5 * floor
                    ? "pass"
                    : "MISS");
    bench::stats st;
    st.n = static_cast<size_t>(iters);
    st.median = st.min = st.p99 = figures[1][0];
    rec.latency(prefix + ".services.p1.assign", st);
    st.median = st.min = st.p99 = figures[1][1];
    rec.latency(prefix + ".services.p1.read", st);
  }
  return services_throughput(*s, *x, bare, rank, size, iters, prefix, rec)
         || failed;
}

/// Microseconds per all-reduce of `n` floats through `shm`, calls back to
/// back after the ranks met (the slowest rank's).
double shm_streamed(shared_memory_group& shm, float* data, int64_t n,
                    int& failures) {
  for (int meet = 0; meet < 2; ++meet) {
    float one = 0;
    if (shm.all_reduce(reduce_op::sum, dtype::float32, &one, 1))
      ++failures;
  }
  const int calls = n * 4 >= (1 << 20) ? 10 : 100;
  auto t0 = bench::clock_type::now();
  for (int k = 0; k < calls; ++k)
    if (shm.all_reduce(reduce_op::sum, dtype::float32, data, n))
      ++failures;
  float per_call = static_cast<float>(bench::micros_since(t0) / calls);
  if (shm.all_reduce(reduce_op::max, dtype::float32, &per_call, 1))
    ++failures;
  std::fill(data, data + n, 1.0f);
  return per_call;
}

int run_rank(int rank, int size, uint16_t store_port, uint16_t strategy_port,
             bool quick, const std::string& json) {
  gloo_group::block_sigpipe();
  caf::actor_system_config cfg;
  configure(cfg);
  caf::actor_system sys{cfg};
  auto store = sys.middleman().remote_actor<rendezvous_store_actor>(
    "127.0.0.1", store_port);
  if (!store) {
    std::fprintf(stderr, "rank %d: no store\n", rank);
    return 1;
  }
  const std::chrono::milliseconds timeout{60000};
  // The bare baseline: a Gloo context of its own, over the same store.
  bare_gloo bare;
  gloo::transport::tcp::attr attr;
  attr.hostname = "127.0.0.1";
  bare.device = gloo::transport::tcp::CreateDevice(attr);
  control_store kv{sys, *store, "bare/", timeout};
  bare.context = std::make_shared<gloo::rendezvous::Context>(rank, size);
  bare.context->setTimeout(timeout);
  bare.context->connectFullMesh(kv, bare.device);

  // The transport a strategy on one host uses, bare: rank 0 names a
  // segment over the bare Gloo context, the others map it.
  std::unique_ptr<shared_memory_group> shm;
  {
    shared_memory_group_options so;
    so.rank = rank;
    so.size = size;
    so.timeout = timeout;
    std::vector<char> name(256, '\0');
    if (rank == 0)
      if (auto g = shared_memory_group::create(so)) {
        shm = std::move(*g);
        std::memcpy(name.data(), shm->name().c_str(),
                    std::min(shm->name().size(), name.size() - 1));
      }
    bare.broadcast(name.data(), name.size(), 0);
    if (rank != 0 && name[0] != '\0')
      if (auto g = shared_memory_group::open(name.data(), so))
        shm = std::move(*g);
    float mapped = shm ? 1.0f : 0.0f;
    bare.all_reduce(&mapped, 1);
    if (rank == 0 && shm)
      shm->unlink();
    if (mapped != static_cast<float>(size))
      shm.reset();
  }

  auto s = strategy::create(one_replica_across(
    rank, size, strategy_port, cluster_mode::training, "varsync"));
  if (!s) {
    std::fprintf(stderr, "rank %d: %s\n", rank, describe(s.error()).c_str());
    return 1;
  }
  bench::recorder rec{rank == 0 ? json : std::string{}};
  const std::string prefix = "processes.p" + std::to_string(size);
  if (rank == 0)
    std::printf("%d processes x 1 replica on loopback, float32 sum\n"
                "      size      step us   bare gloo us  step MB/s  "
                "throughput vs bare  target (>=0.9 from 1 MiB)  floor us  "
                "step/floor  bare shm us  step/shm  shm streamed us\n",
                size);
  const size_t max_bytes = quick ? (size_t{1} << 20) : (size_t{256} << 20);
  std::vector<float> buf(max_bytes / sizeof(float), 1.0f);
  // The floor of a step: the bare all-reduce, one small round (the
  // agreement that keeps the processes in step) and the two memory passes
  // the step makes besides Gloo's (the contribution copied into the pack,
  // the sum added into the component), timed on buffers of the same size.
  std::vector<float> pack(buf.size(), 0.0f), component(buf.size(), 0.0f);
  std::vector<float> shm_buf(shm ? buf.size() : 0, 1.0f);
  float token = 1;
  int failures = 0;
  for (size_t bytes = 4096; bytes <= max_bytes; bytes *= 4) {
    const auto n = static_cast<int64_t>(bytes / sizeof(float));
    const int iters = bytes >= (size_t{128} << 20) ? 3
                      : bytes >= (size_t{16} << 20) ? 5
                      : bytes >= (1 << 20)          ? 10
                                                    : 50;
    auto v = s->create_variable("w" + std::to_string(bytes),
                                tensor::zeros(dtype::float32, {n}),
                                synchronization::on_write, aggregation::sum);
    if (!v) {
      std::fprintf(stderr, "rank %d: %s\n", rank, describe(v.error()).c_str());
      return 1;
    }
    auto contribution = tensor::filled(dtype::float32, {n}, 1.0);
    const std::vector<variable> only{*v};
    std::vector<double> ours, theirs, floors, shms;
    // The step and the bare shared memory transport first, the bare Gloo
    // calls after them: a socket's wake-up can leave the processes on one
    // core for milliseconds, a state the step itself does not leave them
    // in (the step's data moves through shared memory on one host).
    for (int it = 0; it < iters + 2; ++it) { // 2 warm-ups each
      double a = timed_step(*s, only, contribution, rank);
      if (a < 0)
        return 1;
      double m = 0;
      if (shm) {
        // The ranks start together, awake (the peer's barrier spins): the
        // first meeting absorbs the skew of the work before, during which
        // a rank that waited long went to sleep; the second starts them
        // within microseconds.
        for (int meet = 0; meet < 2; ++meet) {
          float one = 0;
          if (shm->all_reduce(reduce_op::sum, dtype::float32, &one, 1))
            ++failures;
        }
        auto t0 = bench::clock_type::now();
        if (shm->all_reduce(reduce_op::sum, dtype::float32, shm_buf.data(), n))
          ++failures;
        float slowest = static_cast<float>(bench::micros_since(t0));
        if (shm->all_reduce(reduce_op::max, dtype::float32, &slowest, 1))
          ++failures;
        m = slowest;
        std::fill(shm_buf.begin(), shm_buf.begin() + n, 1.0f);
      }
      if (it >= 2) {
        ours.push_back(a);
        if (shm)
          shms.push_back(m);
      }
    }
    (void) s->destroy(*v);
    double streamed = shm ? shm_streamed(*shm, shm_buf.data(), n, failures)
                          : 0.0;
    for (int it = 0; it < iters + 2; ++it) {
      auto t0 = bench::clock_type::now();
      bare.all_reduce(buf.data(), static_cast<size_t>(n));
      double b = bench::micros_since(t0);
      std::fill(buf.begin(), buf.begin() + n, 1.0f);
      t0 = bench::clock_type::now();
      bare.all_reduce(&token, 1);
      token = 1;
      std::memcpy(pack.data(), contribution.raw(), bytes);
      for (int64_t i = 0; i < n; ++i)
        component[static_cast<size_t>(i)] += pack[static_cast<size_t>(i)];
      double extra = bench::micros_since(t0);
      if (it >= 2) {
        theirs.push_back(b);
        floors.push_back(b + extra);
      }
    }
    auto a = bench::summarize(ours);
    auto b = bench::summarize(theirs);
    auto f = bench::summarize(floors);
    double ratio = b.median / a.median;
    if (rank == 0) {
      auto m = shm ? bench::summarize(shms) : bench::stats{};
      std::printf("%10s %12.1f %14.1f %10.1f %19.2f  %-24s %9.1f %10.2f "
                  "%12.1f %9.2f %16.1f\n",
                  bench::size_name(bytes).c_str(), a.median, b.median,
                  static_cast<double>(bytes) / a.median, ratio,
                  bytes < (1 << 20) ? "-" : ratio >= 0.9 ? "pass" : "MISS",
                  f.median, a.median / f.median, m.median,
                  m.median > 0 ? a.median / m.median : 0.0, streamed);
      auto key = prefix + ".s" + std::to_string(bytes);
      rec.latency(key + ".step", a);
      rec.latency(key + ".gloo", b);
      rec.latency(key + ".floor", f);
      if (shm) {
        rec.latency(key + ".shm", m);
        rec.latency(key + ".shm_stream", bench::summarize({streamed}));
      }
    }
  }
  // A fused training step: `fused` variables of 256 KiB each updated in
  // one step (one agreement, one all-reduce of the fused 2 MiB), against
  // one bare Gloo allreduce of the same total in the same processes.
  {
    constexpr int fused = 8;
    const int64_t n = (256 << 10) / static_cast<int64_t>(sizeof(float));
    const size_t total = fused * static_cast<size_t>(n) * sizeof(float);
    std::vector<variable> vars;
    for (int k = 0; k < fused; ++k) {
      auto v = s->create_variable("layer" + std::to_string(k),
                                  tensor::zeros(dtype::float32, {n}),
                                  synchronization::on_write,
                                  aggregation::sum);
      if (!v) {
        std::fprintf(stderr, "rank %d: %s\n", rank,
                     describe(v.error()).c_str());
        return 1;
      }
      vars.push_back(*v);
    }
    auto grad = tensor::filled(dtype::float32, {n}, 1.0);
    if (buf.size() < total / sizeof(float)) // --quick stops below 2 MiB
      buf.resize(total / sizeof(float), 1.0f);
    std::vector<double> ours, theirs;
    const int iters = quick ? 10 : 30;
    for (int it = 0; it < iters + 2; ++it) {
      double a = timed_step(*s, vars, grad, rank);
      if (a < 0)
        return 1;
      auto t0 = bench::clock_type::now();
      bare.all_reduce(buf.data(), total / sizeof(float));
      double b = bench::micros_since(t0);
      std::fill(buf.begin(), buf.begin() + static_cast<int64_t>(total / 4),
                1.0f);
      if (it >= 2) {
        ours.push_back(a);
        theirs.push_back(b);
      }
    }
    for (auto& v : vars)
      (void) s->destroy(v);
    auto a = bench::summarize(ours);
    auto b = bench::summarize(theirs);
    if (rank == 0) {
      std::printf("\nfused training step, %d variables x 256 KiB: %.1f us, "
                  "bare Gloo allreduce of %s %.1f us, throughput vs bare "
                  "%.2f  %s\n",
                  fused, a.median, bench::size_name(total).c_str(), b.median,
                  b.median / a.median,
                  b.median / a.median >= 0.9 ? "pass" : "MISS");
      rec.latency(prefix + ".fused8x256k.step", a);
      rec.latency(prefix + ".fused8x256k.gloo", b);
    }
  }
  // Small operations and their floor.
  auto x = s->create_variable("x", tensor::scalar<float>(0),
                              synchronization::on_write, aggregation::sum);
  auto c = s->create_variable("c", tensor::scalar<float>(0),
                              synchronization::on_read, aggregation::sum);
  if (!x || !c)
    return 1;
  const int small_iters = quick ? 200 : 1000;
  auto assign = bench::time_calls_us(small_iters, 20, [&] {
    if (s->assign(*x, 1.0))
      ++failures;
  });
  auto read = bench::time_calls_us(small_iters, 20, [&] {
    if (!s->read(*c))
      ++failures;
  });
  float one = 1;
  auto gloo_small = bench::time_calls_us(small_iters, 20,
                                         [&] { bare.all_reduce(&one, 1); });
  // Bare CAF remote request/response: process 1 to an echo actor in
  // process 0 (its port travels by a Gloo broadcast).
  int32_t echo_port = 0;
  caf::actor echo_actor;
  if (rank == 0) {
    echo_actor = sys.spawn(echo);
    auto p = sys.middleman().publish(echo_actor, 0, "127.0.0.1");
    echo_port = p ? *p : 0;
  }
  bare.broadcast(&echo_port, sizeof(echo_port), 0);
  double caf_rtt[3] = {0, 0, 0}; // median, min, p99 measured by process 1
  if (rank == 1 && echo_port != 0) {
    auto remote = sys.middleman().remote_actor(
      "127.0.0.1", static_cast<uint16_t>(echo_port));
    if (remote) {
      caf::scoped_actor self{sys};
      auto st = bench::time_calls_us(small_iters, 20, [&] {
        self->request(*remote, std::chrono::seconds(10), int32_t{1})
          .receive([](int32_t) {}, [&](caf::error&) { ++failures; });
      });
      caf_rtt[0] = st.median;
      caf_rtt[1] = st.min;
      caf_rtt[2] = st.p99;
    }
  }
  bare.broadcast(caf_rtt, sizeof(caf_rtt), 1);
  if (rank == 0) {
    caf::anon_send_exit(echo_actor, caf::exit_reason::user_shutdown);
    const double floor = caf_rtt[0] + gloo_small.median;
    std::printf("\nsmall operations (median us): bare CAF remote round trip "
                "%.1f + one Gloo 4-byte allreduce %.1f = floor %.1f\n",
                caf_rtt[0], gloo_small.median, floor);
    std::printf("  cross-replica scalar assign %8.1f  %.2fx floor  %s\n",
                assign.median, assign.median / floor,
                assign.median <= 1.5 * floor ? "pass" : "MISS");
    std::printf("  ON_READ sum scalar read     %8.1f  %.2fx floor  %s\n",
                read.median, read.median / floor,
                read.median <= 1.5 * floor ? "pass" : "MISS");
    rec.latency(prefix + ".assign", assign);
    rec.latency(prefix + ".read", read);
    rec.latency(prefix + ".gloo_small", gloo_small);
    bench::stats rtt;
    rtt.median = caf_rtt[0];
    rtt.min = caf_rtt[1];
    rtt.p99 = caf_rtt[2];
    rtt.n = static_cast<size_t>(small_iters);
    rec.latency(prefix + ".caf_remote", rtt);
  }
  if (services_rows(sys, bare, rank, size, small_iters, caf_rtt[0]
                                                      + gloo_small.median,
                    prefix, rec))
    ++failures;
  return failures == 0 ? 0 : 1;
}

} // namespace

int main(int argc, char** argv) {
  // A rank: process_strategy --rank R --size P --store X --rendezvous Y ...
  if (argc >= 9 && std::string{argv[1]} == "--rank") {
    int rank = std::atoi(argv[2]);
    int size = std::atoi(argv[4]);
    auto store_port = static_cast<uint16_t>(std::atoi(argv[6]));
    auto strategy_port = static_cast<uint16_t>(std::atoi(argv[8]));
    bool quick = false;
    std::string json;
    for (int i = 9; i < argc; ++i) {
      std::string a = argv[i];
      if (a == "--quick")
        quick = true;
      else if (a == "--json" && i + 1 < argc)
        json = argv[++i];
    }
    return run_rank(rank, size, store_port, strategy_port, quick, json);
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
      std::fprintf(stderr, "usage: process_strategy [--quick] [--json FILE] "
                           "[--processes N]\n");
      return 2;
    }
  }
  if (processes < 2) {
    std::fprintf(stderr, "process_strategy: --processes must be >= 2\n");
    return 2;
  }
  caf::actor_system_config cfg;
  configure(cfg);
  caf::actor_system sys{cfg};
  auto store = spawn_rendezvous_store(sys);
  auto port = sys.middleman().publish(store, 0, "127.0.0.1");
  const int strategy_port = bench::free_loopback_port();
  if (!port || strategy_port == 0) {
    std::fprintf(stderr, "process_strategy: no ports\n");
    return 1;
  }
  int rc = bench::run_ranks(processes, "process_strategy", [&](int r) {
    std::vector<std::string> args{"--rank", std::to_string(r), "--size",
                                  std::to_string(processes), "--store",
                                  std::to_string(*port), "--rendezvous",
                                  std::to_string(strategy_port)};
    args.insert(args.end(), passthrough.begin(), passthrough.end());
    return args;
  });
  caf::anon_send_exit(store, caf::exit_reason::user_shutdown);
  return rc;
}
