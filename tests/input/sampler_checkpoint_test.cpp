// I6, I7: batches for run() with the exact global mean over uneven batches,
// and the sampler's position through a checkpoint, resumed with the same
// and with another replica count.

#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <map>
#include <numeric>
#include <string>
#include <vector>

#include <unistd.h>

#include "varsync/checkpoint.hpp"
#include "varsync/ext/input_batches.hpp"
#include "varsync/ext/sampler.hpp"
#include "varsync/ext/sampler_checkpoint.hpp"
#include "varsync/varsync.hpp"

using namespace varsync;
using namespace varsync::input;
using namespace std::chrono_literals;

namespace {

strategy make_strategy(int replicas) {
  strategy_options o;
  o.devices.clear();
  for (int r = 0; r < replicas; ++r)
    o.devices.push_back("cpu:" + std::to_string(r));
  o.scheduler_threads = 2;
  o.timeout = 20s;
  auto s = strategy::create(o);
  if (!s)
    FAIL("strategy::create: " << describe(s.error()));
  return std::move(*s);
}

distributed_sampler make_sampler(sampler_options o, int replicas) {
  auto s = distributed_sampler::create(o, replicas);
  if (!s)
    FAIL("create: " << describe(s.error()));
  return std::move(*s);
}

std::string temp_path(const char* what) {
  return "/tmp/varsync-input-" + std::string{what} + "-"
         + std::to_string(::getpid()) + ".safetensors";
}

using steps = std::vector<std::vector<std::vector<int64_t>>>;

steps rest_of_epoch(distributed_sampler& s) {
  steps out;
  while (!s.epoch_done()) {
    auto step = s.next();
    REQUIRE(step);
    out.push_back(step->items);
  }
  return out;
}

void count_into(std::map<int64_t, int>& c, const steps& st) {
  for (const auto& step : st)
    for (const auto& batch : step)
      for (auto i : batch)
        ++c[i];
}

const sampler_options partial_opts{.num_items = 37, .global_batch_size = 8,
                                   .seed = 5, .end = uneven_end::partial};

/// Runs 2 steps of epoch 2 on 4 replicas, records and saves the position:
/// returns what those steps handed out and what the rest of the epoch would
/// have.
std::pair<steps, steps> save_mid_epoch(const std::string& path) {
  auto s = make_strategy(4);
  auto sampler = make_sampler(partial_opts, 4);
  auto pos = create_position_variable(s, sampler, "data/position");
  REQUIRE(pos);
  REQUIRE_FALSE(sampler.begin_epoch(2));
  steps before;
  for (int k = 0; k < 2; ++k)
    before.push_back(sampler.next()->items);
  REQUIRE_FALSE(record_position(s, *pos, sampler));
  REQUIRE_FALSE(save(s, path));
  auto after = rest_of_epoch(sampler);
  s.shutdown();
  return {before, after};
}

} // namespace

TEST_CASE("I6: batches by replica id, the exact global mean over uneven batches") {
  auto s = make_strategy(4);
  // 11 items, global batch 8: the second step gives replicas 1, 1, 1, 0.
  auto sampler = make_sampler({.num_items = 11, .global_batch_size = 8,
                               .shuffle = false, .end = uneven_end::partial}, 4);
  REQUIRE_FALSE(sampler.begin_epoch(0));
  REQUIRE(next_batches(s, sampler, [](const input_context&) { return 0; }));
  auto batches = next_batches(s, sampler, [](const input_context& ctx) {
    CHECK(ctx.per_replica_batch_size == 2);
    CHECK(ctx.global_count == 3);
    std::vector<double> xs;
    for (auto i : ctx.items)
      xs.push_back(double(i * i));
    return tensor::from_vector<double>({int64_t(xs.size())}, xs);
  });
  REQUIRE(batches);
  CHECK(batches->global_count() == 3);
  auto out = s.run([&](replica_context& ctx) { return (*batches)[ctx]; });
  REQUIRE(out);
  // D4: total over count, so the empty batch of replica 3 weighs nothing.
  auto mean = s.reduce(reduce_op::mean, *out, 0);
  REQUIRE(mean);
  CHECK(mean->as_double() == Approx((64.0 + 81 + 100) / 3));
  CHECK_THROWS_AS(batches->of(4), std::out_of_range);
  s.shutdown();
}

TEST_CASE("I6: batches need the strategy's replica count") {
  auto s = make_strategy(2);
  auto sampler = make_sampler({.num_items = 9}, 3);
  REQUIRE_FALSE(sampler.begin_epoch(0));
  auto b = next_batches(s, sampler, [](const input_context&) { return 1; });
  REQUIRE_FALSE(b);
  CHECK(has_code(b.error(), errc::invalid_argument));
  CHECK_THAT(message_of(b.error()), Catch::Contains("expected the strategy's 2"));
  CHECK(sampler.position().step == 0); // the sampler did not move
  s.shutdown();
}

TEST_CASE("I7: resumed with the same replicas, the same steps") {
  const auto path = temp_path("same");
  auto [before, after] = save_mid_epoch(path);
  auto s = make_strategy(4);
  auto sampler = make_sampler(partial_opts, 4);
  auto pos = create_position_variable(s, sampler, "data/position");
  REQUIRE(pos);
  REQUIRE_FALSE(restore(s, path));
  REQUIRE_FALSE(restore_position(s, *pos, sampler));
  CHECK(sampler.position().epoch == 2);
  CHECK(sampler.position().step == 2);
  CHECK(sampler.position().offset == 16);
  CHECK(rest_of_epoch(sampler) == after);
  std::map<int64_t, int> c;
  count_into(c, before);
  count_into(c, after);
  CHECK(c.size() == 37);
  for (auto [item, k] : c)
    CHECK(k == 1);
  // The next epoch goes on as usual; the restored one is used.
  CHECK(has_code(sampler.begin_epoch(2), errc::invalid_argument));
  CHECK_FALSE(sampler.begin_epoch(3));
  s.shutdown();
  std::remove(path.c_str());
}

TEST_CASE("I7: resumed with other replica counts, the rest re-shared") {
  const auto path = temp_path("other");
  auto [before, after] = save_mid_epoch(path);
  for (int replicas : {1, 3, 6}) {
    INFO(replicas << " replicas after the restore");
    auto s = make_strategy(replicas);
    auto o = partial_opts;
    o.global_batch_size = 2 * replicas;
    auto sampler = make_sampler(o, replicas);
    auto pos = create_position_variable(s, sampler, "data/position");
    REQUIRE(pos);
    REQUIRE_FALSE(restore(s, path));
    REQUIRE_FALSE(restore_position(s, *pos, sampler));
    auto rest = rest_of_epoch(sampler);
    for (const auto& step : rest)
      CHECK(step.size() == size_t(replicas));
    std::map<int64_t, int> c;
    count_into(c, before);
    count_into(c, rest);
    CHECK(c.size() == 37); // every item of the epoch once
    for (auto [item, k] : c)
      CHECK(k == 1);
    s.shutdown();
  }
  std::remove(path.c_str());
}

TEST_CASE("I7: another dataset, seed or a bad position changes nothing") {
  const auto path = temp_path("mismatch");
  save_mid_epoch(path);
  auto s = make_strategy(2);
  auto expect_unchanged = [&](sampler_options o, errc code, const char* text) {
    auto sampler = make_sampler(o, 2);
    REQUIRE_FALSE(sampler.begin_epoch(0));
    REQUIRE(sampler.next());
    const auto before = sampler.position();
    auto pos = s.lookup("data/position");
    REQUIRE(pos);
    auto err = restore_position(s, *pos, sampler);
    CHECK(has_code(err, code));
    CHECK_THAT(message_of(err), Catch::Contains(text));
    CHECK(sampler.position().epoch == before.epoch);
    CHECK(sampler.position().offset == before.offset);
    CHECK(sampler.position().step == before.step);
  };
  auto sampler = make_sampler(partial_opts, 2);
  REQUIRE(create_position_variable(s, sampler, "data/position"));
  REQUIRE_FALSE(restore(s, path));
  auto o = partial_opts;
  o.num_items = 38;
  expect_unchanged(o, errc::checkpoint_mismatch, "num_items 37, expected 38");
  o = partial_opts;
  o.seed = 6;
  expect_unchanged(o, errc::checkpoint_mismatch, "seed");
  o = partial_opts;
  o.shuffle = false;
  expect_unchanged(o, errc::checkpoint_mismatch, "shuffle");
  // A position past the dataset's end.
  auto pos = s.lookup("data/position");
  REQUIRE(pos);
  auto bad = s.read(*pos)->to_vector<int64_t>();
  bad[6] = 99;
  REQUIRE_FALSE(s.assign(*pos, tensor::from_vector<int64_t>({8}, bad)));
  expect_unchanged(partial_opts, errc::checkpoint_corrupt, "outside a dataset");
  // A variable that is no position.
  auto other = s.create_variable("w", tensor::zeros(dtype::float32, {8}),
                                 synchronization::on_write, aggregation::mean);
  REQUIRE(other);
  auto plain = make_sampler(partial_opts, 2);
  auto err = restore_position(s, *other, plain);
  CHECK(has_code(err, errc::checkpoint_mismatch));
  CHECK_THAT(message_of(err), Catch::Contains("not a sampler position"));
  CHECK_FALSE(plain.position().started);
  s.shutdown();
  std::remove(path.c_str());
}
