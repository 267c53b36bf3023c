// One process of a two-process NCCL communicator on one machine, for
// nccl_processes_test.cpp. Both processes may use one GPU: each gets its own
// NCCL_HOSTID from the test, so NCCL treats them as two hosts and talks over
// sockets. The NCCL id travels through a file in DIR.
//
//   nccl_rank MODE RANK DIR
//
// MODE (rank 0 checks, rank 1 plays the peer):
//   values        both run one plan: a float16 mean of 60000 and 60000
//                 (inf if reduced in 16 bits), a float32 max where one
//                 rank has a NaN, a float32 sum of staged buffers
//   dead          rank 1 joins and exits before the first collective
//   stopped       rank 1 joins, then stops itself (SIGSTOP) before it
//   stopped-warm  one plan on both first, then rank 1 stops itself
//   join-absent   rank 1 never joins: rank 0's join fails at its deadline
// `nccl_rank env` prints the NCCL library version and the GPU count.
// In the failure modes rank 0's run must fail within its deadline plus the
// abort grace, with its components unchanged, and the collective must be
// destroyed without waiting for the peer. Exit 0: every check held.

#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/bounded_wait.hpp"
#include "devices/cuda/cuda_device.hpp"
#include "sync/collectives/collective_buffers.hpp"
#include "sync/collectives/collective_plan.hpp"
#include "sync/nccl/device_collective.hpp"
#include "sync/nccl/nccl_clique.hpp"
#include "sync/nccl/same_device_reduce.hpp"
#include "varsync/error.hpp"
#include "varsync/tensor.hpp"

using namespace varsync;
using namespace std::chrono_literals;
using clk = std::chrono::steady_clock;

namespace {

int failures = 0;

#define EXPECT(cond)                                                           \
  do {                                                                         \
    if (!(cond)) {                                                             \
      std::printf("FAILED: %s (line %d)\n", #cond, __LINE__);                  \
      ++failures;                                                              \
    }                                                                          \
  } while (false)

double ms_since(clk::time_point t) {
  return std::chrono::duration<double, std::milli>(clk::now() - t).count();
}

std::vector<std::byte> share_id(int rank, const std::string& dir) {
  const std::string path = dir + "/nccl.id";
  if (rank == 0) {
    auto id = nccl::new_unique_id();
    if (!id) {
      std::printf("FAILED: new_unique_id: %s\n", describe(id.error()).c_str());
      std::exit(1);
    }
    std::ofstream(path + ".tmp", std::ios::binary)
      .write(reinterpret_cast<const char*>(id->data()),
             static_cast<std::streamsize>(id->size()));
    std::rename((path + ".tmp").c_str(), path.c_str());
    return *id;
  }
  std::vector<std::byte> id(nccl::unique_id_bytes);
  for (int i = 0; i < 3000; ++i) {
    std::ifstream f(path, std::ios::binary);
    if (f && f.read(reinterpret_cast<char*>(id.data()),
                    static_cast<std::streamsize>(id.size())))
      return id;
    std::this_thread::sleep_for(10ms);
  }
  std::printf("FAILED: no NCCL id from rank 0 within 30 s\n");
  std::exit(1);
}

std::shared_ptr<collective_algorithm>
joined_collective(int rank, const std::string& dir,
                  wait_clock::time_point deadline, caf::error* err = nullptr) {
  auto id = share_id(rank, dir);
  auto c = nccl::clique::join({0}, 2, rank, id, deadline);
  if (!c) {
    if (err != nullptr) {
      *err = c.error();
      return nullptr;
    }
    std::printf("FAILED: join: %s\n", describe(c.error()).c_str());
    std::exit(1);
  }
  cuda_collective_plan topo;
  topo.path = cuda_collective_path::nccl_clique;
  topo.gpus = {0};
  topo.gpu_slot = {0};
  auto made = make_nccl_clique_collective(topo, std::move(*c));
  if (!made) {
    std::printf("FAILED: collective: %s\n", describe(made.error()).c_str());
    std::exit(1);
  }
  return *made;
}

tensor filled(dtype t, int64_t n, double v) {
  auto out = tensor::empty(t, {n});
  for (int64_t i = 0; i < n; ++i)
    store_double(t, out.mutable_raw(), i, v);
  return out;
}

/// One plan of three items over this process's one replica; keeps its
/// device memory.
struct values_run {
  std::unique_ptr<cuda_device> dev;
  std::vector<void*> comps;
  void* staged = nullptr;
  collective_plan plan;
  collective_buffers b;
  static constexpr int64_t n = 1000;

  explicit values_run(int rank) {
    auto d = cuda_device::open(0);
    if (!d) {
      std::printf("FAILED: cuda:0: %s\n", describe(d.error()).c_str());
      std::exit(1);
    }
    dev = std::move(*d);
    plan.num_replicas = 1;
    auto add = [&](dtype t, reduce_op op, tensor contribution) {
      auto& item = plan.add_item();
      item.type = t;
      item.count = n;
      item.rop = op;
      item.uop = update_op::assign;
      item.mirrored = true;
      item.source = collective_source::contributions;
      item.target = collective_target::components;
      item.contributions = {std::move(contribution)};
      auto c = dev->allocate(static_cast<size_t>(n) * size_of(t));
      comps.push_back(*c);
      (void) dev->upload(*c, filled(t, n, 0.0));
      auto& ib = b.items.emplace_back();
      ib.inputs = {item.contributions[0].raw()};
      ib.components = {*c};
    };
    add(dtype::float16, reduce_op::mean, filled(dtype::float16, n, 60000.0));
    auto with_nan = filled(dtype::float32, n, rank == 0 ? 1.0 : 2.0);
    if (rank == 1)
      store_double(dtype::float32, with_nan.mutable_raw(), 7, std::nan(""));
    add(dtype::float32, reduce_op::max, std::move(with_nan));
    // A staged contribution (a step's device buffer).
    add(dtype::float32, reduce_op::sum, tensor{});
    auto& last = plan.items.back();
    last.staged = {1};
    auto s = dev->allocate(static_cast<size_t>(n) * sizeof(float));
    staged = *s;
    (void) dev->upload(staged, filled(dtype::float32, n, rank + 1.0));
    b.items.back().inputs = {staged};
    b.ready_events = {nullptr};
  }

  caf::error run(collective_algorithm& a, std::chrono::milliseconds within) {
    b.deadline = deadline_after(within);
    return a.run(plan, b, 0, 1);
  }

  double value(size_t item, int64_t i) {
    auto t = dev->download(comps[item], plan.items[item].type,
                           tensor_shape{n});
    return t ? load_double(plan.items[item].type, t->raw(), i) : -1.0;
  }
};

int values(int rank, const std::string& dir) {
  auto a = joined_collective(rank, dir, deadline_after(60s));
  values_run r{rank};
  if (auto err = r.run(*a, 30s)) {
    std::printf("FAILED: run: %s\n", describe(err).c_str());
    return 1;
  }
  EXPECT(r.value(0, 0) == 60000.0); // 16-bit: inf
  EXPECT(r.value(1, 0) == 2.0);
  EXPECT(std::isnan(r.value(1, 7))); // NCCL's max alone drops NaN
  EXPECT(r.value(2, 0) == 3.0);
  std::printf("RESULT values rank=%d fp16_mean=%g max=%g nan_kept=%d sum=%g\n",
              rank, r.value(0, 0), r.value(1, 0),
              std::isnan(r.value(1, 7)) ? 1 : 0, r.value(2, 0));
  return failures == 0 ? 0 : 1;
}

/// Rank 0 when its peer is gone or stopped: the run fails within its
/// deadline plus the abort grace, nothing changed, teardown without a wait.
int lone_run(const std::string& mode, const std::string& dir, bool warm) {
  auto a = joined_collective(0, dir, deadline_after(60s));
  values_run r{0};
  if (warm) {
    if (auto err = r.run(*a, 30s)) {
      std::printf("FAILED: warm-up run: %s\n", describe(err).c_str());
      return 1;
    }
    for (size_t k = 0; k < r.comps.size(); ++k) // back to zero
      (void) r.dev->upload(r.comps[k],
                           filled(r.plan.items[k].type, values_run::n, 0.0));
  }
  std::this_thread::sleep_for(500ms); // the peer has gone or stopped
  // A large host contribution after the first item: a pageable copy queued
  // behind the stuck NCCL work would keep the caller there.
  auto big = filled(dtype::float32, int64_t{16} << 20, 1.0);
  auto& item = r.plan.add_item();
  item.type = dtype::float32;
  item.count = big.size();
  item.uop = update_op::assign_add;
  item.mirrored = true;
  item.source = collective_source::contributions;
  item.target = collective_target::components;
  item.contributions = {big};
  auto c = r.dev->allocate(big.nbytes());
  (void) r.dev->upload(*c, filled(dtype::float32, big.size(), 5.0));
  auto& ib = r.b.items.emplace_back();
  ib.inputs = {item.contributions[0].raw()};
  ib.components = {*c};
  const auto start = clk::now();
  auto err = r.run(*a, 1000ms);
  const double took = ms_since(start);
  EXPECT(err);
  EXPECT(has_code(err, errc::device_error));
  // Deadline 1 s, then at most abort_grace (2 s) for the streams.
  EXPECT(took < 1000.0 + 2000.0 + 1500.0);
  EXPECT(r.value(0, 0) == 0.0); // nothing applied
  EXPECT(r.value(2, 0) == 0.0);
  auto last = r.dev->download(*c, dtype::float32, tensor_shape{big.size()});
  EXPECT(last && load_double(dtype::float32, last->raw(), 0) == 5.0);
  const auto t0 = clk::now();
  a.reset(); // aborts (never destroys) the joined communicator
  const double destroy_ms = ms_since(t0);
  EXPECT(destroy_ms < 1500.0);
  std::printf("RESULT %s took_ms=%.0f error=\"%s\" destroy_ms=%.0f\n",
              mode.c_str(), took, describe(err).c_str(), destroy_ms);
  return failures == 0 ? 0 : 1;
}

int peer(const std::string& mode, const std::string& dir) {
  if (mode == "join-absent")
    return 0; // never joins
  auto a = joined_collective(1, dir, deadline_after(60s));
  if (mode == "stopped-warm") {
    values_run r{1};
    if (auto err = r.run(*a, 30s)) {
      std::printf("FAILED: warm-up run: %s\n", describe(err).c_str());
      return 1;
    }
  }
  if (mode == "dead")
    std::_Exit(0); // sockets close, no goodbye
  std::raise(SIGSTOP); // alive, silent: the test kills it
  return 0;
}

int join_absent(const std::string& dir) {
  const auto start = clk::now();
  caf::error err;
  auto a = joined_collective(0, dir, deadline_after(1000ms), &err);
  const double took = ms_since(start);
  EXPECT(!a);
  EXPECT(has_code(err, errc::device_error));
  // Aborting a half-made communicator took up to 2 s (NCCL 2.28, H200).
  EXPECT(took < 1000.0 + 4000.0);
  std::printf("RESULT join-absent took_ms=%.0f error=\"%s\"\n", took,
              describe(err).c_str());
  return failures == 0 ? 0 : 1;
}

} // namespace

int main(int argc, char** argv) {
  if (argc == 2 && std::string{argv[1]} == "env") {
    const int v = nccl::library_version();
    std::printf("nccl %d.%d.%d, %d GPU(s)\n", v / 10000, v / 100 % 100, v % 100,
                cuda_device_count());
    return 0;
  }
  if (argc != 4) {
    std::fprintf(stderr, "usage: nccl_rank MODE RANK DIR\n");
    return 2;
  }
  const std::string mode = argv[1];
  const int rank = std::atoi(argv[2]);
  const std::string dir = argv[3];
  std::setvbuf(stdout, nullptr, _IONBF, 0);
  if (rank == 1 && mode != "values")
    return peer(mode, dir);
  if (mode == "values")
    return values(rank, dir);
  if (mode == "join-absent")
    return join_absent(dir);
  if (mode == "dead" || mode == "stopped" || mode == "stopped-warm")
    return lone_run(mode, dir, mode == "stopped-warm");
  std::fprintf(stderr, "nccl_rank: unknown mode '%s'\n", mode.c_str());
  return 2;
}
