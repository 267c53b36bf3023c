// cuda_device against the host kernels: round trips, apply, split_assign,
// the reduce kernel and the same-GPU reduce_and_apply, every dtype, bit for
// bit (NaN = NaN). Needs a GPU (gpu_main.cpp exits with 77 without one).

#include "gpu_test_util.hpp"

#include <memory>
#include <random>
#include <vector>

#include "devices/device.hpp"
#include "devices/host_kernels.hpp"
#include "sync/nccl/same_device_reduce.hpp"
#include "varsync/synchronization.hpp"

using namespace varsync;
using namespace gpu_test;

namespace {

const std::vector<update_op> update_ops{update_op::assign,
                                        update_op::assign_add,
                                        update_op::assign_sub};
const std::vector<reduce_op> reduce_ops{reduce_op::sum, reduce_op::mean,
                                        reduce_op::min, reduce_op::max,
                                        reduce_op::prod};

// Odd sizes cross block and grid-stride boundaries.
constexpr int64_t n = 100003;

} // namespace

TEST_CASE("cuda_device: make_device(cuda:0) opens GPU 0", "[gpu][cuda_device]") {
  auto dev = make_device(device_id{device_kind::cuda, 0});
  REQUIRE(dev);
  CHECK((*dev)->id() == device_id{device_kind::cuda, 0});
  CHECK_FALSE((*dev)->host_accessible());
  auto missing = make_device(device_id{device_kind::cuda, 4096});
  REQUIRE_FALSE(missing);
  CHECK(has_code(missing.error(), errc::device_error));
  CHECK(message_of(missing.error()).find("cuda:4096") != std::string::npos);
}

TEST_CASE("cuda_device: upload/download round trip, every dtype",
          "[gpu][cuda_device]") {
  auto dev = open_gpu();
  std::mt19937_64 rng{1};
  for (dtype t : all_dtypes()) {
    INFO("dtype " << to_string(t));
    for (const tensor_shape& shape :
         {tensor_shape{}, tensor_shape{0}, tensor_shape{7, 13},
          tensor_shape{n}}) {
      // Every bit pattern, NaNs included: a copy must keep them all.
      auto x = tensor::empty(t, shape);
      auto* bytes = static_cast<unsigned char*>(x.mutable_raw());
      for (size_t i = 0; i < x.nbytes(); ++i)
        bytes[i] = static_cast<unsigned char>(rng());
      device_buffer buf{*dev, x};
      auto back = buf.download(t, shape);
      CHECK(back.bitwise_equal(x));
    }
  }
}

TEST_CASE("cuda_device: devices of one GPU share one pool: what one releases "
          "another reuses", "[gpu][cuda_device]") {
  auto replica = open_gpu();
  auto collective = open_gpu();
  auto a = replica->allocate(1000);
  REQUIRE(a);
  CHECK(replica->live_bytes() == 1024); // rounded to 512 bytes
  replica->release(*a);
  CHECK(replica->live_bytes() == 0);
  const size_t big = size_t{64} << 20;
  auto b = replica->allocate(big);
  REQUIRE(b);
  replica->release(*b);
  REQUIRE_FALSE(replica->synchronize());
  const size_t unused = collective->pooled_bytes();
  CHECK(unused >= big);
  // The other device object takes the released memory: the pool does not
  // grow, its unused part shrinks by the block.
  auto c = collective->allocate(big);
  REQUIRE(c);
  REQUIRE_FALSE(collective->synchronize());
  CHECK(collective->pooled_bytes() + big <= unused);
  CHECK(collective->live_bytes() == big);
  CHECK(replica->live_bytes() == 0);
  collective->release(*c);
}

TEST_CASE("cuda_device: an impossible allocation is out_of_memory",
          "[gpu][cuda_device]") {
  auto dev = open_gpu();
  auto p = dev->allocate(size_t{1} << 52); // 4 PiB
  REQUIRE_FALSE(p);
  CHECK(has_code(p.error(), errc::out_of_memory));
  CHECK(message_of(p.error()).find("cuda:0") != std::string::npos);
  // The device still works afterwards.
  auto q = dev->allocate(64);
  REQUIRE(q);
  dev->release(*q);
}

TEST_CASE("cuda_device: apply matches host::apply_update bit for bit",
          "[gpu][cuda_device]") {
  auto dev = open_gpu();
  std::mt19937_64 rng{2};
  for (dtype t : all_dtypes()) {
    for (update_op op : update_ops) {
      INFO("dtype " << to_string(t) << ", op " << to_string(op));
      auto c = random_tensor(t, {n}, rng);
      auto y = random_tensor(t, {n}, rng);
      auto expected = c.clone();
      host::apply_update(op, t, expected.mutable_raw(), y.raw(), 0, n);
      device_buffer buf{*dev, c};
      auto err = dev->apply(buf.get(), op, y);
      REQUIRE_FALSE(err);
      CHECK_SAME_VALUES(buf.download(t, {n}), expected);
    }
  }
}

TEST_CASE("cuda_device: split_assign matches host R4 bit for bit",
          "[gpu][cuda_device]") {
  auto dev = open_gpu();
  std::mt19937_64 rng{3};
  for (dtype t : all_dtypes()) {
    auto x = random_tensor(t, {n}, rng);
    for (int replicas : {1, 3, 4, 7}) {
      std::vector<tensor> shares;
      for (int rank = 0; rank < replicas; ++rank) {
        INFO("dtype " << to_string(t) << ", rank " << rank << " of "
                      << replicas);
        auto expected = tensor::empty(t, {n});
        host::split_assign(t, expected.mutable_raw(), x.raw(), 0, n, rank,
                           replicas);
        device_buffer buf{*dev, static_cast<size_t>(n) * size_of(t)};
        auto err = dev->split_assign(buf.get(), x, rank, replicas);
        REQUIRE_FALSE(err);
        auto got = buf.download(t, {n});
        CHECK_SAME_VALUES(got, expected);
        shares.push_back(std::move(got));
      }
      if (!is_floating(t)) {
        // Integer shares add up to x exactly (wrapping).
        auto sum = shares[0].clone();
        for (int r = 1; r < replicas; ++r)
          host::apply_update(update_op::assign_add, t, sum.mutable_raw(),
                             shares[static_cast<size_t>(r)].raw(), 0, n);
        CHECK(sum.bitwise_equal(x));
      }
    }
  }
  auto x = tensor::from_list<int32_t>({1, 2});
  device_buffer buf{*dev, x.nbytes()};
  auto err = dev->split_assign(buf.get(), x, 2, 2);
  CHECK(has_code(err, errc::invalid_argument));
}

TEST_CASE("cuda_device: the reduce kernel matches host::reduce bit for bit",
          "[gpu][cuda_device]") {
  auto dev = open_gpu();
  std::mt19937_64 rng{4};
  for (dtype t : all_dtypes()) {
    for (reduce_op op : reduce_ops) {
      if (op == reduce_op::mean && !is_floating(t))
        continue;
      for (int k : {1, 2, 5}) {
        INFO("dtype " << to_string(t) << ", op " << to_string(op) << ", "
                      << k << " inputs");
        std::vector<tensor> inputs;
        std::vector<device_buffer> bufs;
        std::vector<const void*> host_ptrs;
        std::vector<const void*> dev_ptrs;
        for (int j = 0; j < k; ++j) {
          inputs.push_back(random_tensor(t, {n}, rng, 10.0));
          bufs.emplace_back(*dev, inputs.back());
          host_ptrs.push_back(inputs.back().raw());
          dev_ptrs.push_back(bufs.back().get());
        }
        auto expected = tensor::empty(t, {n});
        host::reduce(op, t, expected.mutable_raw(), host_ptrs, 0, n);
        device_buffer out{*dev, static_cast<size_t>(n) * size_of(t)};
        REQUIRE_FALSE(dev->reduce(op, t, out.get(), dev_ptrs, n));
        REQUIRE_FALSE(dev->synchronize());
        CHECK_SAME_VALUES(out.download(t, {n}), expected);
      }
    }
  }
}

TEST_CASE("same-GPU reduce_and_apply matches the host one-pass kernel",
          "[gpu][same_gpu]") {
  // Two device objects on one GPU: two replicas sharing cuda:0.
  auto dev_a = open_gpu();
  auto dev_b = open_gpu();
  cuda_device* devs[] = {dev_a.get(), dev_b.get()};
  std::mt19937_64 rng{5};
  for (dtype t : all_dtypes()) {
    for (reduce_op rop : reduce_ops) {
      if (rop == reduce_op::mean && !is_floating(t))
        continue;
      for (update_op uop : update_ops) {
        for (int replicas : {1, 2, 3}) {
          for (int variant = 0; variant < 3; ++variant) {
            // 0: separate buffers, 1: in place, 2: mirrored components.
            const bool in_place = variant == 1;
            const bool mirrored = variant == 2;
            INFO("dtype " << to_string(t) << ", " << to_string(rop) << " then "
                          << to_string(uop) << ", " << replicas
                          << " replicas, in place " << in_place
                          << ", mirrored " << mirrored);
            std::vector<tensor> contrib, comps;
            auto mirror = random_tensor(t, {n}, rng, 10.0);
            for (int r = 0; r < replicas; ++r) {
              contrib.push_back(random_tensor(t, {n}, rng, 10.0));
              comps.push_back(in_place ? contrib.back().clone()
                              : mirrored ? mirror.clone()
                                         : random_tensor(t, {n}, rng, 10.0));
            }
            // Host reference (its kernel needs unaliased buffers).
            std::vector<tensor> expected;
            std::vector<const void*> hc;
            std::vector<void*> hm;
            for (int r = 0; r < replicas; ++r) {
              expected.push_back(comps[static_cast<size_t>(r)].clone());
              hc.push_back(contrib[static_cast<size_t>(r)].raw());
            }
            for (auto& e : expected)
              hm.push_back(e.mutable_raw());
            host::reduce_and_apply(rop, uop, t, hc, hm, 0, n);
            // GPU: replica r's buffers on devs[r % 2].
            std::vector<device_buffer> cbufs, mbufs;
            std::vector<const void*> dc;
            std::vector<void*> dm;
            for (int r = 0; r < replicas; ++r) {
              auto& d = *devs[r % 2];
              mbufs.emplace_back(d, comps[static_cast<size_t>(r)]);
              dm.push_back(mbufs.back().get());
              if (in_place) {
                dc.push_back(mbufs.back().get());
              } else {
                cbufs.emplace_back(d, contrib[static_cast<size_t>(r)]);
                dc.push_back(cbufs.back().get());
              }
            }
            auto err =
              same_device_all_reduce(*dev_a, rop, uop, t, dc, dm, n, mirrored);
            REQUIRE_FALSE(err);
            REQUIRE_FALSE(dev_a->synchronize());
            for (int r = 0; r < replicas; ++r)
              CHECK_SAME_VALUES(mbufs[static_cast<size_t>(r)].download(t, {n}),
                                expected[static_cast<size_t>(r)]);
          }
        }
      }
    }
  }
}

TEST_CASE("plan_cuda_collective names the path for a device list",
          "[gpu][same_gpu]") {
  auto plan = [](std::vector<device_id> ids) {
    return describe(plan_cuda_collective(ids));
  };
  const device_id c0{device_kind::cuda, 0}, c1{device_kind::cuda, 1};
  const device_id h0{device_kind::host, 0};
  CHECK(plan({h0, h0}) == "host collective");
  CHECK(plan({c0, c1}) == "nccl clique over 2 GPUs");
  CHECK(plan({c0, c0}) == "device copies on one GPU");
  CHECK(plan({c0, c0, c1}) == "device copies per GPU, then nccl clique over 2 GPUs");
  CHECK(plan({h0, c0}) == "mixed host and CUDA: reduce on one device, then broadcast");
}

// Not yet here: a strategy-level test (a strategy over cuda:0..N-1 running a
// replica step with ON_WRITE updates) waits for the actor integration of the
// CUDA backend (replica actors on cuda devices entering the NCCL / same-GPU
// collectives). See docs/cuda.md.

// The checks a collective runs on device contributions (V4, W4) give the
// host checks' answers: the first overflowing element, the first replica
// whose bits differ.
TEST_CASE("cuda_device: first_overflow finds the element host::first_overflow "
          "finds", "[gpu][cuda_device][checks]") {
  auto dev = open_gpu();
  std::mt19937_64 rng{11};
  for (dtype t : {dtype::int32, dtype::int64}) {
    for (reduce_op op : {reduce_op::sum, reduce_op::prod, reduce_op::min,
                         reduce_op::max}) {
      for (update_op u : update_ops) {
        for (int k : {1, 2, 5}) {
          INFO("dtype " << to_string(t) << ", op " << to_string(op) << ", "
                        << to_string(u) << ", " << k << " inputs");
          // Small values fit; one element near the end gets the dtype's
          // extreme in every input, so that sums, products and updates of
          // it overflow (min/max never do).
          std::vector<tensor> inputs;
          for (int j = 0; j < k; ++j)
            inputs.push_back(random_small_ints(t, n, rng, 1000));
          auto component = random_small_ints(t, n, rng, 1000);
          const int64_t at = n - 17;
          for (auto& x : inputs)
            store_double(t, x.mutable_raw(), at,
                         t == dtype::int32 ? 2147483000.0 : 9.2e18);
          std::vector<device_buffer> bufs;
          std::vector<const void*> host_ptrs;
          std::vector<const void*> dev_ptrs;
          for (auto& x : inputs) {
            bufs.emplace_back(*dev, x);
            host_ptrs.push_back(x.raw());
            dev_ptrs.push_back(bufs.back().get());
          }
          device_buffer comp{*dev, component};
          auto want = host::first_overflow(op, u, t, host_ptrs,
                                           component.raw(), 0, n);
          auto got = dev->first_overflow(op, u, t, dev_ptrs, comp.get(), n);
          REQUIRE(got);
          CHECK(*got == want);
          auto want_alone = host::first_overflow(op, update_op::assign, t,
                                                 host_ptrs, nullptr, 0, n);
          auto alone = dev->first_overflow(op, update_op::assign, t, dev_ptrs,
                                           nullptr, n);
          REQUIRE(alone);
          CHECK(*alone == want_alone);
        }
      }
    }
  }
  // Floating dtypes are refused, nothing launched.
  device_buffer f{*dev, tensor::scalar<float>(1)};
  const void* one[] = {f.get()};
  CHECK_FALSE(dev->first_overflow(reduce_op::sum, update_op::assign,
                                  dtype::float32, one, nullptr, 1));
}

TEST_CASE("cuda_device: first_unequal names the first replica whose bits "
          "differ from replica 0's", "[gpu][cuda_device][checks]") {
  auto dev = open_gpu();
  std::mt19937_64 rng{12};
  for (dtype t : all_dtypes()) {
    INFO("dtype " << to_string(t));
    auto base = random_tensor(t, {n}, rng);
    std::vector<tensor> inputs(4, base);
    std::vector<device_buffer> bufs;
    std::vector<const void*> ptrs;
    auto upload_all = [&] {
      bufs.clear();
      ptrs.clear();
      for (auto& x : inputs) {
        bufs.emplace_back(*dev, x);
        ptrs.push_back(bufs.back().get());
      }
    };
    upload_all();
    auto equal = dev->first_unequal(t, ptrs, n);
    REQUIRE(equal);
    CHECK(*equal == -1);
    // One bit of one element of replicas 3 and 2: the first is named.
    inputs[3] = base.clone();
    inputs[2] = base.clone();
    static_cast<unsigned char*>(inputs[3].mutable_raw())[5] ^= 1;
    static_cast<unsigned char*>(
      inputs[2].mutable_raw())[(n - 1) * size_of(t)] ^= 0x80;
    upload_all();
    auto differs = dev->first_unequal(t, ptrs, n);
    REQUIRE(differs);
    CHECK(*differs == 2);
  }
}
