// The NCCL clique over every visible GPU (a clique of one with one GPU):
// all_reduce, broadcast, all_gather, reduce-to-one and the fused batch
// all_reduce, checked against host reductions. Values are small integers, so
// sums are exact whatever NCCL's reduction order. Needs a GPU.

#include "gpu_test_util.hpp"

#include <cmath>
#include <memory>
#include <numeric>
#include <random>
#include <vector>

#include "devices/host_kernels.hpp"
#include "sync/nccl/nccl_across_processes_collective.hpp"
#include "sync/nccl/nccl_clique.hpp"
#include "varsync/error.hpp"
#include "varsync/synchronization.hpp"

using namespace varsync;
using namespace gpu_test;

namespace {

struct gpus {
  std::vector<int> ids;
  std::vector<std::unique_ptr<cuda_device>> devs;
  std::unique_ptr<nccl::clique> clique;

  gpus() {
    const int count = cuda_device_count();
    REQUIRE(count > 0);
    for (int g = 0; g < count; ++g) {
      ids.push_back(g);
      devs.push_back(open_gpu(g));
    }
    auto c = nccl::clique::create(ids);
    if (!c)
      FAIL("clique: " << describe(c.error()));
    clique = std::move(*c);
    REQUIRE(clique->size() == count);
  }
  size_t size() const { return ids.size(); }
};

tensor host_reduce(reduce_op op, dtype t, const std::vector<tensor>& xs) {
  std::vector<const void*> ptrs;
  for (const auto& x : xs)
    ptrs.push_back(x.raw());
  auto out = tensor::empty(t, xs[0].shape());
  host::reduce(op, t, out.mutable_raw(), ptrs, 0, xs[0].size());
  return out;
}

constexpr int64_t n = 10007;

} // namespace

TEST_CASE("nccl clique: all_reduce over every visible GPU", "[gpu][nccl]") {
  gpus g;
  std::mt19937_64 rng{11};
  for (dtype t : all_dtypes()) {
    for (reduce_op op : {reduce_op::sum, reduce_op::max, reduce_op::min}) {
      INFO("dtype " << to_string(t) << ", op " << to_string(op));
      std::vector<tensor> xs;
      std::vector<device_buffer> bufs;
      std::vector<const void*> send;
      std::vector<void*> recv;
      for (size_t r = 0; r < g.size(); ++r) {
        xs.push_back(random_small_ints(t, n, rng));
        bufs.emplace_back(*g.devs[r], xs.back());
        send.push_back(bufs.back().get());
        recv.push_back(bufs.back().get()); // in place
      }
      REQUIRE_FALSE(g.clique->all_reduce(op, t, send, recv, n));
      REQUIRE_FALSE(g.clique->synchronize());
      auto expected = host_reduce(op, t, xs);
      for (size_t r = 0; r < g.size(); ++r)
        CHECK_SAME_VALUES(bufs[r].download(t, {n}), expected);
    }
  }
}

TEST_CASE("nccl clique: mean is ncclAvg for floats, rejected for integers",
          "[gpu][nccl]") {
  gpus g;
  std::mt19937_64 rng{12};
  std::vector<tensor> xs;
  std::vector<device_buffer> bufs;
  std::vector<const void*> send;
  std::vector<void*> recv;
  for (size_t r = 0; r < g.size(); ++r) {
    xs.push_back(random_small_ints(dtype::float32, n, rng));
    bufs.emplace_back(*g.devs[r], xs.back());
    send.push_back(bufs.back().get());
    recv.push_back(bufs.back().get());
  }
  REQUIRE_FALSE(g.clique->all_reduce(reduce_op::mean, dtype::float32, send,
                                     recv, n));
  REQUIRE_FALSE(g.clique->synchronize());
  auto expected = host_reduce(reduce_op::mean, dtype::float32, xs);
  for (size_t r = 0; r < g.size(); ++r) {
    auto got = bufs[r].download(dtype::float32, {n});
    for (int64_t i = 0; i < n; ++i)
      REQUIRE(got.data<float>()[i]
              == Approx(expected.data<float>()[i]).margin(1e-4));
  }
  auto err = g.clique->all_reduce(reduce_op::mean, dtype::int32, send, recv, n);
  CHECK(has_code(err, errc::invalid_argument));
}

TEST_CASE("nccl clique: floating min and max propagate NaN like the host "
          "kernels (NCCL alone drops it), in all_reduce and the batch",
          "[gpu][nccl]") {
  gpus g;
  std::mt19937_64 rng{21};
  for (auto t : {dtype::float16, dtype::bfloat16, dtype::float32,
                 dtype::float64}) {
    for (auto op : {reduce_op::min, reduce_op::max}) {
      INFO(to_string(t) << " " << to_string(op));
      std::vector<tensor> xs;
      for (size_t r = 0; r < g.size(); ++r) {
        auto x = random_small_ints(t, n, rng);
        // A NaN on the last rank at element 7, on rank 0 at element 11.
        if (r + 1 == g.size())
          store_double(t, x.mutable_raw(), 7, std::nan(""));
        if (r == 0)
          store_double(t, x.mutable_raw(), 11, std::nan(""));
        xs.push_back(x);
      }
      auto expected = host_reduce(op, t, xs);
      for (bool batch : {false, true}) {
        INFO((batch ? "all_reduce_batch" : "all_reduce"));
        std::vector<device_buffer> bufs;
        std::vector<const void*> send;
        std::vector<void*> recv;
        std::vector<std::vector<nccl::buffer>> per_rank(g.size());
        for (size_t r = 0; r < g.size(); ++r) {
          bufs.emplace_back(*g.devs[r], xs[r]);
          send.push_back(bufs.back().get());
          recv.push_back(bufs.back().get());
          per_rank[r] = {{recv[r], n, t}};
        }
        if (batch)
          REQUIRE_FALSE(g.clique->all_reduce_batch(op, per_rank));
        else
          REQUIRE_FALSE(g.clique->all_reduce(op, t, send, recv, n));
        REQUIRE_FALSE(g.clique->synchronize());
        for (size_t r = 0; r < g.size(); ++r) {
          auto got = bufs[r].download(t, {n});
          std::string why;
          CHECK(same_values(got, expected, &why));
          CHECK(std::isnan(got.as_double(7)));
          CHECK(std::isnan(got.as_double(11)));
        }
      }
    }
  }
}

TEST_CASE("nccl clique: broadcast, all_gather and reduce to one",
          "[gpu][nccl]") {
  gpus g;
  const auto size = g.size();
  const int root = static_cast<int>(size) - 1;
  std::mt19937_64 rng{13};
  const dtype t = dtype::int64;
  std::vector<tensor> xs;
  std::vector<device_buffer> in, out, gathered;
  std::vector<const void*> send;
  std::vector<void*> recv, recv_all;
  for (size_t r = 0; r < size; ++r) {
    xs.push_back(random_small_ints(t, n, rng));
    in.emplace_back(*g.devs[r], xs.back());
    out.emplace_back(*g.devs[r], n * size_of(t));
    gathered.emplace_back(*g.devs[r], size * n * size_of(t));
    send.push_back(in.back().get());
    recv.push_back(out.back().get());
    recv_all.push_back(gathered.back().get());
  }

  REQUIRE_FALSE(g.clique->broadcast(t, send, recv, n, root));
  REQUIRE_FALSE(g.clique->synchronize());
  for (size_t r = 0; r < size; ++r)
    CHECK(out[r].download(t, {n}).bitwise_equal(xs[static_cast<size_t>(root)]));

  REQUIRE_FALSE(g.clique->all_gather(t, send, recv_all, n));
  REQUIRE_FALSE(g.clique->synchronize());
  for (size_t r = 0; r < size; ++r) {
    auto all = gathered[r].download(t, {static_cast<int64_t>(size) * n});
    for (size_t k = 0; k < size; ++k)
      CHECK(std::memcmp(static_cast<const char*>(all.raw()) + k * xs[k].nbytes(),
                        xs[k].raw(), xs[k].nbytes())
            == 0);
  }

  REQUIRE_FALSE(g.clique->reduce(reduce_op::sum, t, send, recv, n, 0));
  REQUIRE_FALSE(g.clique->synchronize());
  CHECK(out[0].download(t, {n}).bitwise_equal(host_reduce(reduce_op::sum, t, xs)));
}

TEST_CASE("nccl clique: fused batch all_reduce over mixed dtypes",
          "[gpu][nccl]") {
  gpus g;
  std::mt19937_64 rng{14};
  const std::vector<std::pair<dtype, int64_t>> layout{
    {dtype::float32, 1000}, {dtype::int32, 37},  {dtype::float32, 1},
    {dtype::float64, 513},  {dtype::float32, 0}, {dtype::bfloat16, 64},
    {dtype::int32, 4099}};
  std::vector<std::vector<tensor>> xs(g.size());
  std::vector<std::vector<device_buffer>> bufs(g.size());
  std::vector<std::vector<nccl::buffer>> lists(g.size());
  for (size_t r = 0; r < g.size(); ++r) {
    for (auto [t, count] : layout) {
      xs[r].push_back(random_small_ints(t, count, rng, 50));
      bufs[r].emplace_back(*g.devs[r], xs[r].back());
      lists[r].push_back({bufs[r].back().get(), count, t});
    }
  }
  REQUIRE_FALSE(g.clique->all_reduce_batch(reduce_op::sum, lists));
  REQUIRE_FALSE(g.clique->synchronize());
  for (size_t k = 0; k < layout.size(); ++k) {
    auto [t, count] = layout[k];
    INFO("buffer " << k << ": " << to_string(t) << " x " << count);
    std::vector<tensor> column;
    for (size_t r = 0; r < g.size(); ++r)
      column.push_back(xs[r][k]);
    auto expected = host_reduce(reduce_op::sum, t, column);
    for (size_t r = 0; r < g.size(); ++r)
      CHECK_SAME_VALUES(bufs[r][k].download(t, {count}), expected);
  }
}

TEST_CASE("nccl clique: a GPU listed twice is refused", "[gpu][nccl]") {
  auto c = nccl::clique::create({0, 0});
  REQUIRE_FALSE(c);
  CHECK(has_code(c.error(), errc::invalid_argument));
  CHECK(message_of(c.error()).find("same-GPU") != std::string::npos);
}

// No ';' in a test name: CTest splits it there into two tests that match
// nothing.
TEST_CASE("nccl clique: join (ncclCommInitRank) makes this process's part "
          "of a communicator, and a world of one all-reduces and averages",
          "[gpu][nccl]") {
  auto id = nccl::new_unique_id();
  if (!id)
    FAIL("new_unique_id: " << describe(id.error()));
  REQUIRE(id->size() == nccl::unique_id_bytes);
  auto c = nccl::clique::join({0}, 1, 0, *id);
  if (!c)
    FAIL("join: " << describe(c.error()));
  auto& clique = **c;
  CHECK(clique.size() == 1);
  CHECK(clique.world_size() == 1);
  CHECK(clique.first_rank() == 0);
  auto dev = open_gpu(0);
  auto x = tensor::from_list<float>({1.f, 2.f, 4.f});
  device_buffer buf{*dev, x};
  std::vector<const void*> send{buf.get()};
  std::vector<void*> recv{buf.get()};
  REQUIRE_FALSE(clique.all_reduce(reduce_op::mean, dtype::float32, send, recv,
                                  3));
  REQUIRE_FALSE(clique.synchronize());
  CHECK_SAME_VALUES(buf.download(dtype::float32, {3}), x);
  // Roots are global ranks: rank 1 does not exist in a world of one.
  CHECK(has_code(clique.broadcast(dtype::float32, send, recv, 3, 1),
                 errc::invalid_argument));
}

TEST_CASE("nccl clique: join refuses what no communicator can be, before any "
          "NCCL call",
          "[gpu][nccl]") {
  std::vector<std::byte> id(nccl::unique_id_bytes);
  std::vector<std::byte> short_id(16);
  CHECK(has_code(nccl::clique::join({0}, 2, 0, short_id).error(),
                 errc::invalid_argument));
  CHECK(has_code(nccl::clique::join({0}, 1, 1, id).error(),
                 errc::invalid_argument)); // rank 1 of a world of 1
  CHECK(has_code(nccl::clique::join({0, 0}, 4, 0, id).error(),
                 errc::invalid_argument)); // one GPU twice
  CHECK(has_code(nccl::clique::join({}, 4, 0, id).error(),
                 errc::invalid_argument));
}

TEST_CASE("nccl across processes takes floating step updates only",
          "[gpu][nccl]") {
  collective_plan plan;
  plan.num_replicas = 1;
  auto& item = plan.add_item();
  item.type = dtype::float32;
  item.count = 4;
  item.source = collective_source::contributions;
  item.target = collective_target::components;
  CHECK(nccl_takes(plan));
  item.first_only = true; // only_first_replica: a broadcast
  CHECK(nccl_takes(plan));
  item.require_equal = true; // aggregation none: the host compares
  CHECK_FALSE(nccl_takes(plan));
  item.require_equal = false;
  item.type = dtype::int32; // integers: overflow votes on the host
  CHECK_FALSE(nccl_takes(plan));
  item.type = dtype::bfloat16;
  item.source = collective_source::components; // a read
  item.target = collective_target::output;
  CHECK_FALSE(nccl_takes(plan));
  item.source = collective_source::contributions;
  item.target = collective_target::components;
  plan.local_error = make_error(errc::timeout, "late"); // agreement only
  CHECK_FALSE(nccl_takes(plan));
  plan.local_error = caf::error{};
  plan.items.clear();
  CHECK_FALSE(nccl_takes(plan));
}
