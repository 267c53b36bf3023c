// The device collective's phases (sync/nccl/device_collective.hpp): nothing
// that writes a component runs before the NCCL work was waited for, the
// rounds between processes (hooks) are always taken part in, 16-bit
// reductions go through float32, items apply in plan order, teardown after
// an abort never waits for work that does not drain, and check copies are
// released item by item. Needs a GPU; across processes see
// nccl_processes_test.cpp.

#include "gpu_test_util.hpp"
#include "stream_blocker.hpp"

#include <chrono>
#include <cmath>
#include <limits>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include <cuda_runtime.h>

#include "core/bounded_wait.hpp"
#include "devices/host_kernels.hpp"
#include "sync/collectives/collective_buffers.hpp"
#include "sync/collectives/collective_plan.hpp"
#include "sync/nccl/device_collective.hpp"
#include "sync/nccl/nccl_clique.hpp"
#include "sync/nccl/same_device_reduce.hpp"
#include "varsync/error.hpp"

using namespace varsync;
using namespace gpu_test;
using namespace std::chrono_literals;

namespace {

/// 16-bit values a float32 sum handles and a 16-bit one does not: large
/// ones (two float16 60000s are inf), tiny ones, specials.
tensor edge_values(dtype t, int64_t n, std::mt19937_64& rng) {
  const double big = t == dtype::float16 ? 60000.0 : 3.0e38;
  const double specials[] = {big, -big, 1e-7, -0.0, 0.5, 1.0 / 3.0,
                             std::numeric_limits<double>::infinity(),
                             std::numeric_limits<double>::quiet_NaN()};
  auto out = tensor::empty(t, {n});
  std::uniform_real_distribution<double> real(-1000.0, 1000.0);
  for (int64_t i = 0; i < n; ++i)
    store_double(t, out.mutable_raw(), i,
                 i % 3 == 0 ? specials[(i / 3) % 8] : real(rng));
  return out;
}

/// A plan of one float32 step update (assign_add, mirrored) per entry of
/// `counts`, for `n` replicas.
collective_plan update_plan(int n, const std::vector<int64_t>& counts) {
  collective_plan plan;
  plan.num_replicas = n;
  for (auto count : counts) {
    auto& item = plan.add_item();
    item.type = dtype::float32;
    item.count = count;
    item.uop = update_op::assign_add;
    item.mirrored = true;
    item.source = collective_source::contributions;
    item.target = collective_target::components;
    item.contributions.assign(static_cast<size_t>(n), tensor{});
  }
  return plan;
}

tensor plus(const tensor& a, const tensor& b) {
  auto out = tensor::empty(a.type(), a.shape());
  for (int64_t i = 0; i < a.size(); ++i)
    out.mutable_data<float>()[i] = a.data<float>()[i] + b.data<float>()[i];
  return out;
}

/// An NCCL clique collective over GPU 0 for one replica: in this process,
/// or (joined) as its own world of one, whose hooks a test may set.
device_collective& clique_collective(
  std::shared_ptr<collective_algorithm>& keep, bool joined) {
  cuda_collective_plan topo;
  topo.path = cuda_collective_path::nccl_clique;
  topo.gpus = {0};
  topo.gpu_slot = {0};
  caf::expected<std::shared_ptr<collective_algorithm>> made{
    std::shared_ptr<collective_algorithm>{}};
  if (joined) {
    auto id = nccl::new_unique_id();
    if (!id)
      FAIL("new_unique_id: " << describe(id.error()));
    auto c = nccl::clique::join({0}, 1, 0, *id);
    if (!c)
      FAIL("join: " << describe(c.error()));
    made = make_nccl_clique_collective(topo, std::move(*c));
  } else {
    made = make_nccl_clique_collective(topo);
  }
  if (!made)
    FAIL("collective: " << describe(made.error()));
  keep = *made;
  return static_cast<device_collective&>(*keep);
}

/// One replica on GPU 0 with a component and a staged contribution.
struct one_replica {
  std::unique_ptr<cuda_device> dev = open_gpu(0);
  tensor c0;
  tensor x;
  std::unique_ptr<device_buffer> comp;
  std::unique_ptr<device_buffer> staged;

  explicit one_replica(uint64_t seed, int64_t n = 4096) {
    std::mt19937_64 rng{seed};
    c0 = random_small_ints(dtype::float32, n, rng);
    x = random_small_ints(dtype::float32, n, rng);
    comp = std::make_unique<device_buffer>(*dev, c0);
    staged = std::make_unique<device_buffer>(*dev, x);
  }

  /// The plan and its buffers for "component += staged contribution".
  std::pair<collective_plan, collective_buffers> step() const {
    auto plan = update_plan(1, {x.size()});
    plan.items[0].staged = {1};
    collective_buffers b;
    b.items.resize(1);
    b.items[0].inputs = {staged->get()};
    b.items[0].components = {comp->get()};
    b.ready_events = {dev->step_done_event()};
    b.deadline = deadline_after(30s);
    return {std::move(plan), std::move(b)};
  }

  tensor component() const { return comp->download(dtype::float32, c0.shape()); }
};

} // namespace

TEST_CASE("16-bit widening: reduce_widen then narrow equals the host's "
          "float16 and bfloat16 reductions bit for bit, where 16-bit partial "
          "sums overflow",
          "[gpu][cuda_device][widen]") {
  auto dev = open_gpu();
  std::mt19937_64 rng{21};
  constexpr int64_t n = 3001;
  for (auto t : {dtype::float16, dtype::bfloat16})
    for (auto op : {reduce_op::sum, reduce_op::mean, reduce_op::prod})
      for (int k : {1, 2, 3, 5}) {
        INFO(to_string(t) << " " << to_string(op) << " of " << k);
        std::vector<tensor> xs;
        std::vector<std::unique_ptr<device_buffer>> bufs;
        std::vector<const void*> host_in;
        std::vector<const void*> dev_in;
        for (int j = 0; j < k; ++j) {
          xs.push_back(edge_values(t, n, rng));
          bufs.push_back(std::make_unique<device_buffer>(*dev, xs.back()));
          host_in.push_back(xs.back().raw());
          dev_in.push_back(bufs.back()->get());
        }
        auto want = tensor::empty(t, {n});
        host::reduce(op, t, want.mutable_raw(), host_in, 0, n);
        device_buffer wide{*dev, n * sizeof(float)};
        device_buffer out{*dev, n * size_of(t)};
        REQUIRE_FALSE(dev->reduce_widen(op == reduce_op::prod ? op
                                                              : reduce_op::sum,
                                        t, static_cast<float*>(wide.get()),
                                        dev_in, n));
        REQUIRE_FALSE(dev->narrow(t, out.get(),
                                  static_cast<const float*>(wide.get()),
                                  op == reduce_op::mean ? k : 1, n));
        REQUIRE_FALSE(dev->synchronize());
        CHECK_SAME_VALUES(out.download(t, {n}), want);
      }
  CHECK(has_code(dev->narrow(dtype::float32, nullptr, nullptr, 1, 1),
                 errc::invalid_argument));
  CHECK(has_code(dev->reduce_widen(reduce_op::min, dtype::float16, nullptr,
                                   std::vector<const void*>{nullptr}, 1),
                 errc::invalid_argument));
}

TEST_CASE("nccl clique: 16-bit sums, means and products travel in float32 "
          "and come back rounded once, alone and in a batch",
          "[gpu][nccl][widen]") {
  auto c = nccl::clique::create({0});
  if (!c)
    FAIL("clique: " << describe(c.error()));
  auto& clique = **c;
  auto dev = open_gpu(0);
  std::mt19937_64 rng{23};
  constexpr int64_t n = 2049;
  for (auto t : {dtype::float16, dtype::bfloat16})
    for (auto op : {reduce_op::sum, reduce_op::mean, reduce_op::prod}) {
      INFO(to_string(t) << " " << to_string(op));
      auto x = edge_values(t, n, rng);
      device_buffer in{*dev, x};
      device_buffer out{*dev, x.nbytes()};
      std::vector<const void*> send{in.get()};
      std::vector<void*> recv{out.get()};
      REQUIRE_FALSE(clique.all_reduce(op, t, send, recv, n));
      // A batch: a 16-bit buffer (widened alone) beside a float32 one.
      auto y = random_small_ints(dtype::float32, 333, rng);
      device_buffer yb{*dev, y};
      device_buffer xb{*dev, x};
      std::vector<std::vector<nccl::buffer>> per_rank{
        {{xb.get(), n, t}, {yb.get(), y.size(), dtype::float32}}};
      REQUIRE_FALSE(clique.all_reduce_batch(op, per_rank));
      REQUIRE_FALSE(clique.synchronize());
      // A world of one: the reduction of one value is that value.
      CHECK_SAME_VALUES(out.download(t, {n}), x);
      CHECK_SAME_VALUES(xb.download(t, {n}), x);
      CHECK_SAME_VALUES(yb.download(dtype::float32, y.shape()), y);
    }
}

TEST_CASE("device collective over NCCL: a run that fails at its deadline has "
          "not applied its update, even with its contribution staged on the "
          "device",
          "[gpu][nccl][deadline][phases]") {
  std::shared_ptr<collective_algorithm> keep;
  auto& algorithm = clique_collective(keep, false);
  one_replica rep{5};
  {
    stream_blocker blocker{rep.dev->native_stream()};
    REQUIRE_FALSE(rep.dev->mark_step_done()); // the step ends behind it
    auto [plan, b] = rep.step();
    b.deadline = deadline_after(150ms);
    auto releaser = blocker.release_after(400ms); // within abort_grace
    auto err = algorithm.run(plan, b, 0, 1);
    releaser.join();
    REQUIRE(err);
    CHECK(has_code(err, errc::device_error));
  }
  REQUIRE_FALSE(rep.dev->synchronize());
  CHECK_SAME_VALUES(rep.component(), rep.c0); // nothing applied
  // The next run makes a new communicator and applies once.
  auto [plan, b] = rep.step();
  auto err = algorithm.run(plan, b, 0, 1);
  if (err)
    FAIL("the run after the failed one: " << describe(err));
  CHECK_SAME_VALUES(rep.component(), plus(rep.c0, rep.x));
}

TEST_CASE("device collective: items apply in plan order: a read before "
          "fused updates of the same variable sees the value before them",
          "[gpu][nccl][phases]") {
  std::shared_ptr<collective_algorithm> keep;
  auto& algorithm = clique_collective(keep, false);
  one_replica rep{7};
  one_replica other{8};
  auto plan = update_plan(1, {rep.x.size(), other.x.size()});
  plan.items[0].staged = {1};
  plan.items[1].staged = {1};
  // Item 0 first: a read of rep's component.
  auto& read = *plan.items.emplace(plan.items.begin());
  read = collective_item{};
  read.type = dtype::float32;
  read.count = rep.c0.size();
  read.source = collective_source::components;
  read.target = collective_target::output;
  read.staged = {0};
  auto out = tensor::empty(dtype::float32, rep.c0.shape());
  collective_buffers b;
  b.items.resize(3);
  b.items[0].inputs = {rep.comp->get()};
  b.items[0].components = {nullptr};
  b.items[0].output = out.mutable_raw();
  b.items[1].inputs = {rep.staged->get()};
  b.items[1].components = {rep.comp->get()};
  b.items[2].inputs = {other.staged->get()};
  b.items[2].components = {other.comp->get()};
  b.ready_events = {nullptr};
  b.deadline = deadline_after(30s);
  auto err = algorithm.run(plan, b, 0, 1);
  if (err)
    FAIL("run: " << describe(err));
  CHECK_SAME_VALUES(out, rep.c0);
  CHECK_SAME_VALUES(rep.component(), plus(rep.c0, rep.x));
  CHECK_SAME_VALUES(other.component(), plus(other.c0, other.x));
}

TEST_CASE("device collective across processes: the agreement hook is "
          "called on every run with the run's error so far, the vote after "
          "every agreed run, and nothing is applied or sent to NCCL unless "
          "they agree",
          "[gpu][nccl][phases][hooks]") {
  std::shared_ptr<collective_algorithm> keep;
  auto& algorithm = clique_collective(keep, true); // a world of one
  one_replica rep{9};
  struct calls {
    int before = 0, after = 0;
    caf::error seen_before, seen_after;
    caf::error say_before, say_after;
  } h;
  collective_phase_hooks hooks;
  hooks.before_communication = [&h](const caf::error& local) {
    ++h.before;
    h.seen_before = local;
    return local ? local : h.say_before;
  };
  hooks.before_apply = [&h](const caf::error& local) {
    ++h.after;
    h.seen_after = local;
    return local ? local : h.say_after;
  };
  algorithm.set_phase_hooks(hooks);
  auto expect = rep.c0;

  SECTION("a run that goes through calls each hook once, without error") {
    auto [plan, b] = rep.step();
    REQUIRE_FALSE(algorithm.run(plan, b, 0, 1));
    CHECK(h.before == 1);
    CHECK(h.after == 1);
    CHECK_FALSE(h.seen_before);
    CHECK_FALSE(h.seen_after);
    expect = plus(rep.c0, rep.x);
  }
  SECTION("a local failure before NCCL (staging) still takes part in the "
          "agreement, with its error; a failed agreement has no vote") {
    auto [plan, b] = rep.step();
    b.items[0].inputs = {nullptr}; // names a staged buffer it did not publish
    auto err = algorithm.run(plan, b, 0, 1);
    REQUIRE(err);
    CHECK(has_code(err, errc::invalid_argument));
    CHECK(h.before == 1);
    CHECK(h.after == 0);
    CHECK(has_code(h.seen_before, errc::invalid_argument));
  }
  SECTION("another process's failure at the agreement: no NCCL call, no "
          "vote, nothing applied") {
    h.say_before = make_error(errc::out_of_memory, "process 1 failed");
    auto [plan, b] = rep.step();
    auto err = algorithm.run(plan, b, 0, 1);
    CHECK(has_code(err, errc::out_of_memory));
    CHECK(h.after == 0);
  }
  SECTION("another process's failure at the commit vote: nothing applied") {
    h.say_after = make_error(errc::device_error, "process 1 timed out");
    auto [plan, b] = rep.step();
    auto err = algorithm.run(plan, b, 0, 1);
    CHECK(has_code(err, errc::device_error));
    CHECK(h.before == 1);
  }
  SECTION("a run held past its deadline votes its failure") {
    stream_blocker blocker{rep.dev->native_stream()};
    REQUIRE_FALSE(rep.dev->mark_step_done());
    auto [plan, b] = rep.step();
    b.deadline = deadline_after(150ms);
    auto releaser = blocker.release_after(400ms);
    auto err = algorithm.run(plan, b, 0, 1);
    releaser.join();
    CHECK(has_code(err, errc::device_error));
    CHECK(has_code(h.seen_after, errc::device_error));
    REQUIRE_FALSE(rep.dev->synchronize());
  }
  CHECK_SAME_VALUES(rep.component(), expect);
  // Unless the deadline aborted it, the communicator is as good as before.
  if (!algorithm.failed()) {
    h = {};
    auto [plan, b] = rep.step();
    REQUIRE_FALSE(algorithm.run(plan, b, 0, 1));
    CHECK_SAME_VALUES(rep.component(), plus(expect, rep.x));
  }
}

TEST_CASE("nccl clique: destroyed after an abort while a stream it used is "
          "still busy, it returns at once and frees nothing that work may "
          "touch",
          "[gpu][nccl][deadline][teardown]") {
  auto dev = open_gpu(0);
  cudaStream_t used = nullptr;
  cudaStream_t other = nullptr;
  REQUIRE(cudaStreamCreateWithFlags(&used, cudaStreamNonBlocking)
          == cudaSuccess);
  REQUIRE(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking)
          == cudaSuccess);
  std::mt19937_64 rng{3};
  auto x = random_small_ints(dtype::float32, 4096, rng);
  device_buffer a{*dev, x};
  device_buffer b{*dev, x};
  REQUIRE_FALSE(dev->synchronize());
  // Made before any stream is held: making a communicator waits for the
  // device's work (it took a whole hold on an H200 with NCCL 2.28).
  auto c = nccl::clique::create({0});
  if (!c)
    FAIL("clique: " << describe(c.error()));
  // A batch of two (the clique's staging buffer) on a stream the caller
  // gives, waited for: the clique used that stream.
  std::vector<std::vector<nccl::buffer>> per_rank{
    {{a.get(), x.size(), dtype::float32}, {b.get(), x.size(), dtype::float32}}};
  std::vector<void*> first{used};
  REQUIRE_FALSE((*c)->all_reduce_batch(reduce_op::sum, per_rank, first));
  REQUIRE_FALSE((*c)->synchronize(first));
  {
    // Work that does not finish on that stream (as work behind a stuck
    // peer's would), then the clique fails on another.
    stream_blocker blocker{used};
    auto releaser = blocker.release_after(3000ms);
    (*c)->abort(make_error(errc::device_error, "a peer is gone"));
    CHECK((*c)->failure());
    std::vector<void*> second{other};
    CHECK(has_code((*c)->all_reduce_batch(reduce_op::sum, per_rank, second),
                   errc::device_error));
    const auto start = wait_clock::now();
    c->reset(); // checks every stream it used: frees nothing, waits for none
    CHECK(wait_clock::now() - start < 1500ms);
    releaser.join();
    REQUIRE(cudaStreamSynchronize(used) == cudaSuccess);
    REQUIRE_FALSE(dev->synchronize());
  }
  cudaStreamDestroy(used);
  cudaStreamDestroy(other);
}

TEST_CASE("cuda_device: copy_from copies pool memory from every visible GPU "
          "(a peer copy between GPUs)",
          "[gpu][cuda_device]") {
  const int count = cuda_device_count();
  auto dst = open_gpu(0);
  std::mt19937_64 rng{31};
  for (int g = 0; g < count; ++g) {
    INFO("from cuda:" << g);
    auto src = open_gpu(g);
    auto x = random_tensor(dtype::float32, {12345}, rng);
    device_buffer from{*src, x};
    device_buffer to{*dst, x.nbytes()};
    REQUIRE_FALSE(src->synchronize());
    REQUIRE_FALSE(dst->copy_from(g, to.get(), from.get(), x.nbytes()));
    REQUIRE_FALSE(dst->synchronize());
    CHECK_SAME_VALUES(to.download(dtype::float32, x.shape()), x);
  }
}

TEST_CASE("device collective: the GPU checks release each item's copies once "
          "it is checked, so a plan's peak memory does not grow by one copy "
          "per item",
          "[gpu][same_gpu][checks]") {
  cuda_collective_plan topo;
  topo.path = cuda_collective_path::same_gpu;
  topo.gpus = {0};
  topo.gpu_slot = {0, 0};
  auto made = make_same_gpu_collective(topo);
  if (!made)
    FAIL("collective: " << describe(made.error()));
  auto& algorithm = **made;
  auto dev = open_gpu(0);
  constexpr int items = 8;
  constexpr int64_t n = int64_t{4} << 20; // 16 MiB of int32 per value
  const size_t bytes = n * sizeof(int32_t);
  auto ones = tensor::empty(dtype::int32, {n});
  for (int64_t i = 0; i < n; ++i)
    ones.mutable_data<int32_t>()[i] = 1;
  const auto zeros = tensor::zeros(dtype::int32, {n});
  device_buffer staged{*dev, ones}; // replica 0's contribution, on the GPU
  std::vector<std::unique_ptr<device_buffer>> comps;
  collective_plan plan;
  plan.num_replicas = 2;
  collective_buffers b;
  for (int k = 0; k < items; ++k) {
    auto& item = plan.add_item();
    item.type = dtype::int32;
    item.count = n;
    item.uop = update_op::assign_add;
    item.source = collective_source::contributions;
    item.target = collective_target::components;
    item.staged = {1, 0};
    item.contributions = {tensor{}, ones}; // replica 1's: a host value
    auto& ib = b.items.emplace_back();
    comps.push_back(std::make_unique<device_buffer>(*dev, zeros));
    comps.push_back(std::make_unique<device_buffer>(*dev, zeros));
    ib.inputs = {staged.get(), ones.raw()};
    ib.components = {comps[comps.size() - 2]->get(), comps.back()->get()};
  }
  b.ready_events = {nullptr, nullptr};
  REQUIRE_FALSE(dev->synchronize());
  dev->pool_used_high(true);
  const size_t base = dev->pool_used_high(); // what is in use now
  auto err = algorithm.run(plan, b, 0, 1);
  if (err)
    FAIL("run: " << describe(err));
  const size_t peak = dev->pool_used_high();
  INFO("peak " << peak << " bytes over " << base << " in use before; one "
               "value is " << bytes);
  // The run copies replica 1's host value once per item to apply it; the
  // checks' copies come and go one item at a time.
  CHECK(peak - base <= (items + 2) * bytes);
  CHECK(peak - base >= items * bytes);
  auto got = comps[0]->download(dtype::int32, {n});
  CHECK(got.data<int32_t>()[0] == 2); // 0 + 1 + 1
}
