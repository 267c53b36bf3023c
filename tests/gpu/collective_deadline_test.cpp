// Deadlines on the device: a GPU collective never hangs the strategy. A
// stream is held up (stream_blocker.hpp), which is how a collective whose
// peer never arrives looks to the host: queued work that does not finish.
// Waits with a deadline return device_error at the deadline, an NCCL clique
// is aborted and never reused, and held-up work that is released later
// still drains. Needs a GPU.

#include "gpu_test_util.hpp"
#include "stream_blocker.hpp"

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include <cuda_runtime.h>

#include "core/bounded_wait.hpp"
#include "devices/cuda/cuda_device_internal.hpp"
#include "sync/collectives/collective_buffers.hpp"
#include "sync/collectives/collective_plan.hpp"
#include "sync/nccl/device_collective.hpp"
#include "sync/nccl/nccl_clique.hpp"
#include "sync/nccl/same_device_reduce.hpp"
#include "varsync/error.hpp"

using namespace varsync;
using namespace gpu_test;
using namespace std::chrono_literals;


TEST_CASE("cuda_device: a wait with a deadline gives up at the deadline "
          "while the stream is held, and waits again once it is released",
          "[gpu][deadline]") {
  auto dev = open_gpu(0);
  std::vector<float> host(1024, 1.0f);
  auto buf = dev->allocate(host.size() * sizeof(float));
  REQUIRE(buf);
  stream_blocker blocker{dev->native_stream()};
  dev->set_wait_deadline(deadline_after(100ms));
  const auto start = wait_clock::now();
  auto err = dev->synchronize();
  const auto took = wait_clock::now() - start;
  REQUIRE(err);
  CHECK(has_code(err, errc::device_error));
  CHECK(describe(err).find("did not complete within its deadline")
        != std::string::npos);
  CHECK(took >= 100ms);
  CHECK(took < 5s);
  blocker.release();
  dev->set_wait_deadline(wait_clock::time_point::max());
  CHECK(!dev->synchronize());
  CHECK(!dev->work_abandoned());
  dev->release(*buf);
}

TEST_CASE("nccl clique: a collective held past its deadline aborts the "
          "communicator, drains once released, and the clique is never "
          "reused",
          "[gpu][nccl][deadline]") {
  auto made = nccl::clique::create({0});
  if (!made)
    FAIL("clique: " << describe(made.error()));
  auto& clique = **made;
  auto dev = open_gpu(0);
  constexpr int64_t count = 4096;
  auto buf = dev->allocate(count * sizeof(float));
  REQUIRE(buf);
  REQUIRE(!dev->synchronize()); // allocated on dev's stream, used on another
  std::vector<void*> streams{clique.stream(0)};
  stream_blocker blocker{streams[0]};
  std::vector<const void*> send{*buf};
  std::vector<void*> recv{*buf};
  REQUIRE(!clique.all_reduce(reduce_op::sum, dtype::float32, send, recv,
                             count, streams));
  // Released while wait() gives the aborted work its grace period.
  auto releaser = blocker.release_after(400ms);
  const auto start = wait_clock::now();
  auto out = clique.wait(streams, deadline_after(150ms), 10s);
  const auto took = wait_clock::now() - start;
  releaser.join();
  REQUIRE(out.error);
  CHECK(has_code(out.error, errc::device_error));
  CHECK(out.aborted);
  CHECK(out.drained);
  CHECK(took >= 150ms);
  CHECK(clique.failure());
  auto again = clique.all_reduce(reduce_op::sum, dtype::float32, send, recv,
                                 count, streams);
  REQUIRE(again);
  CHECK(describe(again).find("never reused") != std::string::npos);
  CHECK(clique.synchronize(streams));
  dev->synchronize();
  dev->release(*buf);
}

TEST_CASE("nccl clique: a wait with a deadline that the work meets changes "
          "nothing",
          "[gpu][nccl][deadline]") {
  auto made = nccl::clique::create({0});
  if (!made)
    FAIL("clique: " << describe(made.error()));
  auto& clique = **made;
  auto dev = open_gpu(0);
  std::mt19937_64 rng{7};
  auto x = random_small_ints(dtype::float32, 1000, rng);
  auto buf = dev->allocate(x.nbytes());
  REQUIRE(buf);
  REQUIRE(!dev->upload(*buf, x));
  std::vector<const void*> send{*buf};
  std::vector<void*> recv{*buf};
  std::vector<void*> streams{dev->native_stream()};
  REQUIRE(!clique.all_reduce(reduce_op::sum, dtype::float32, send, recv,
                             x.size(), streams));
  auto out = clique.wait(streams, deadline_after(30s), 1s);
  CHECK(!out.error);
  CHECK(!out.aborted);
  CHECK(!clique.failure());
  auto y = dev->download(*buf, dtype::float32, x.shape());
  REQUIRE(y);
  std::string why;
  CHECK(same_values(*y, x, &why)); // one rank: the sum is the input
  dev->release(*buf);
}

TEST_CASE("device collective over an NCCL clique: a run held past its "
          "deadline fails with device_error, and the next run makes a new "
          "communicator and applies its update",
          "[gpu][nccl][deadline]") {
  cuda_collective_plan topo;
  topo.path = cuda_collective_path::nccl_clique;
  topo.gpus = {0};
  topo.gpu_slot = {0};
  auto made = make_nccl_clique_collective(topo);
  if (!made)
    FAIL("collective: " << describe(made.error()));
  auto& algorithm = static_cast<device_collective&>(**made);
  // The replica: its component, and a step whose end is held up.
  auto replica = open_gpu(0);
  std::mt19937_64 rng{11};
  auto c0 = random_small_ints(dtype::float32, 5000, rng);
  auto x = random_small_ints(dtype::float32, 5000, rng);
  auto comp = replica->allocate(c0.nbytes());
  REQUIRE(comp);
  REQUIRE(!replica->upload(*comp, c0));
  auto make_plan = [&] {
    collective_plan plan;
    plan.num_replicas = 1;
    auto& item = plan.add_item();
    item.type = dtype::float32;
    item.count = x.size();
    item.uop = update_op::assign_add;
    item.mirrored = true;
    item.source = collective_source::contributions;
    item.target = collective_target::components;
    item.contributions = {x};
    return plan;
  };
  auto bind = [&](collective_plan& plan, void* ready) {
    collective_buffers b;
    b.items.resize(1);
    b.items[0].inputs = {plan.items[0].contributions[0].raw()};
    b.items[0].components = {*comp};
    b.ready_events = {ready};
    return b;
  };
  {
    stream_blocker blocker{replica->native_stream()};
    REQUIRE(!replica->mark_step_done());
    auto plan = make_plan();
    auto buffers = bind(plan, replica->step_done_event());
    buffers.deadline = deadline_after(150ms);
    auto releaser = blocker.release_after(400ms); // within abort_grace
    auto err = algorithm.run(plan, buffers, 0, 1);
    releaser.join();
    REQUIRE(err);
    CHECK(has_code(err, errc::device_error));
    CHECK(algorithm.failed());
  }
  REQUIRE(!replica->synchronize());
  auto plan = make_plan();
  auto buffers = bind(plan, nullptr);
  buffers.deadline = deadline_after(30s);
  auto err = algorithm.run(plan, buffers, 0, 1);
  if (err)
    FAIL("the run after the abort: " << describe(err));
  CHECK(!algorithm.failed());
  auto got = replica->download(*comp, dtype::float32, c0.shape());
  REQUIRE(got);
  // Applied once: the held run uploaded nothing into the component.
  auto want = tensor::empty(dtype::float32, c0.shape());
  for (int64_t i = 0; i < c0.size(); ++i)
    want.mutable_data<float>()[i]
      = c0.data<float>()[i] + x.data<float>()[i];
  std::string why;
  CHECK(same_values(*got, want, &why));
  replica->release(*comp);
}
