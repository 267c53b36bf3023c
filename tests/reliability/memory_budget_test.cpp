// Reliability: memory exhaustion is an error, not a kill. Every request
// sized by the caller is checked against the memory budget before anything is
// allocated (docs/memory.md): one that does not fit fails with out_of_memory
// naming what asked, the bytes and the budget, and changes nothing.

#include "../semantics/fixture.hpp"

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <future>
#include <mutex>
#include <sstream>
#include <string>
#include <unistd.h>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>

#include "varsync/checkpoint.hpp"
#include "varsync/config.hpp"
#include "devices/memory_budget.hpp"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#  define VS_MEM_SANITIZED 1
#elif defined(__has_feature)
#  if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)      \
    || __has_feature(memory_sanitizer)
#    define VS_MEM_SANITIZED 1
#  endif
#endif
#ifndef VS_MEM_SANITIZED
#  define VS_MEM_SANITIZED 0
#endif

using namespace vs_test;
namespace fs = std::filesystem;

namespace {

constexpr int64_t MiB = int64_t{1} << 20;

// Host replicas: the budget is about host memory.
strategy budget_strategy(int replicas, uint64_t budget) {
  strategy_options options;
  options.memory_budget_bytes = budget;
  return make_host_strategy(replicas, std::move(options));
}

// Uninitialized: a refused request never touches it, and the ones that are
// accepted copy it without reading it as numbers.
tensor mib_f32(int64_t mib) {
  return tensor::empty(dtype::float32, {mib * MiB / 4});
}

bool mentions(const caf::error& err, const std::string& text) {
  return message_of(err).find(text) != std::string::npos;
}

} // namespace

TEST_CASE("memory: a variable beyond the strategy's budget is out_of_memory "
          "and changes nothing") {
  auto s = budget_strategy(1, 64 * MiB);
  auto small = make_var(s, "small", tensor::scalar<float>(1.0f),
                        synchronization::on_write, aggregation::sum);
  auto before = take_snapshot(s);
  auto held = host_component_bytes();
  auto big = s.create_variable("big", mib_f32(100), synchronization::on_write,
                               aggregation::sum);
  REQUIRE_FALSE(big);
  INFO(describe(big.error()));
  CHECK(has_code(big.error(), errc::out_of_memory));
  CHECK(mentions(big.error(), "'big'"));
  CHECK(mentions(big.error(), "104857600 bytes")); // requested
  CHECK(mentions(big.error(), "64 MiB"));          // the budget
  // Nothing changed: no component anywhere, the registry as it was.
  CHECK(host_component_bytes() == held);
  CHECK(same(before, take_snapshot(s)));
  VS_CHECK_CODE(error_of(s.lookup("big")), unknown_variable);
  // The name is still free.
  auto fits = s.create_variable("big", mib_f32(10));
  CHECK(fits);
  (void) small;
}

TEST_CASE("memory: check_host_memory says whether work of the caller's own "
          "fits the budget, and reserves nothing") {
  auto s = budget_strategy(1, 64 * MiB);
  auto held = host_component_bytes();
  auto no = s.check_host_memory(100 * MiB, "loading shard 'a'");
  VS_CHECK_CODE(no, out_of_memory);
  CHECK(mentions(no, "loading shard 'a'"));
  CHECK(mentions(no, "104857600 bytes"));
  CHECK(mentions(no, "64 MiB"));
  VS_REQUIRE_OK(s.check_host_memory(40 * MiB, "loading shard 'b'"));
  CHECK(host_component_bytes() == held);
  // Nothing was reserved: 40 MiB that were only checked leave room for a
  // 40 MiB variable.
  CHECK(s.create_variable("w", mib_f32(40)));
}

TEST_CASE("memory: the budget covers every host replica's component") {
  // 3 x 30 MiB do not fit 64 MiB, although one 30 MiB value does.
  auto s = budget_strategy(3, 64 * MiB);
  auto v = s.create_variable("w", mib_f32(30));
  REQUIRE_FALSE(v);
  CHECK(has_code(v.error(), errc::out_of_memory));
  CHECK(mentions(v.error(), "3 components"));
  CHECK(VS_VALUE(s.variables()).empty());
  CHECK(s.create_variable("w", mib_f32(20)));
}

TEST_CASE("memory: variables that together exceed the budget") {
  auto s = budget_strategy(1, 64 * MiB);
  auto first = s.create_variable("first", mib_f32(40));
  REQUIRE(first);
  auto second = s.create_variable("second", mib_f32(40));
  REQUIRE_FALSE(second);
  CHECK(has_code(second.error(), errc::out_of_memory));
  CHECK(mentions(second.error(), "'second'"));
  CHECK(VS_VALUE(s.variables()).size() == 1);
  // Destroying the first gives its memory back.
  VS_REQUIRE_OK(s.destroy(*first));
  auto again = s.create_variable("second", mib_f32(40));
  CHECK(again);
}

TEST_CASE("memory: concurrent creations cannot share the last of the budget") {
  // Each creation reserves its bytes when the coordinator accepts it, so
  // never more than fit succeed (3 x 20 MiB in 64 MiB). A creation whose
  // replicas have already allocated counts twice until the coordinator
  // confirms it (its reservation is released then), so a slow run (TSan)
  // may refuse the third: 2 or 3 succeed, never 4.
  auto s = budget_strategy(1, 64 * MiB);
  auto value = mib_f32(20); // shared by every request: no copies
  constexpr int requests = 8;
  std::mutex mtx;
  int created = 0, refused = 0, other = 0;
  std::promise<void> all_done;
  int answered = 0;
  for (int i = 0; i < requests; ++i) {
    variable_spec spec;
    spec.name = "v" + std::to_string(i);
    spec.initial_value = value;
    s.async().create_variable(std::move(spec), [&](caf::expected<variable> r) {
      std::lock_guard<std::mutex> guard{mtx};
      if (r)
        ++created;
      else if (has_code(r.error(), errc::out_of_memory))
        ++refused;
      else
        ++other;
      if (++answered == requests)
        all_done.set_value();
    });
  }
  REQUIRE(all_done.get_future().wait_for(20s) == std::future_status::ready);
  CHECK(created >= 2);
  CHECK(created <= 3);
  CHECK(refused == requests - created);
  CHECK(other == 0);
  CHECK(VS_VALUE(s.variables()).size() == static_cast<size_t>(created));
}

TEST_CASE("memory: the budget from the actor system config") {
  caf::actor_system_config cfg;
  register_types(cfg);
  cfg.set("scheduler.max-threads", 2);
  cfg.set("logger.verbosity", caf::atom("quiet"));
  cfg.set("varsync.memory-budget-mb", 64);
  caf::actor_system sys{cfg};
  strategy_options options;
  options.devices = {"cpu:0"};
  options.timeout = 20s;
  {
    auto s = strategy::create(sys, options);
    REQUIRE(s);
    auto v = s->create_variable("big", mib_f32(100));
    REQUIRE_FALSE(v);
    CHECK(has_code(v.error(), errc::out_of_memory));
    CHECK(mentions(v.error(), "varsync.memory-budget-mb"));
    s->shutdown();
  }
  // strategy_options wins over the config.
  options.memory_budget_bytes = 256 * MiB;
  auto s = strategy::create(sys, options);
  REQUIRE(s);
  CHECK(s->create_variable("big", mib_f32(100)));
  s->shutdown();
}

TEST_CASE("memory: reductions and gathers whose outputs exceed the budget") {
  auto s = budget_strategy(2, 64 * MiB);
  // The caller's own values do not count; what the call would allocate does.
  auto x = mib_f32(40);
  per_replica<tensor> values{{x, x}};
  SECTION("gather: 2 x 40 MiB") {
    auto r = s.gather(values, 0);
    REQUIRE_FALSE(r);
    CHECK(has_code(r.error(), errc::out_of_memory));
    CHECK(mentions(r.error(), "gather"));
  }
  SECTION("batch_all_reduce: two outputs of 40 MiB") {
    auto r = s.batch_all_reduce(reduce_op::sum, {values, values});
    REQUIRE_FALSE(r);
    CHECK(has_code(r.error(), errc::out_of_memory));
    CHECK(mentions(r.error(), "all_reduce"));
  }
  SECTION("mean of int32: float64 copies of 2 x 20 M elements") {
    auto i = tensor::empty(dtype::int32, {40 * MiB / 4});
    per_replica<tensor> ints{{i, i}};
    auto r = s.all_reduce(reduce_op::mean, ints);
    REQUIRE_FALSE(r);
    CHECK(has_code(r.error(), errc::out_of_memory));
    auto d = s.reduce(reduce_op::mean, ints);
    REQUIRE_FALSE(d);
    CHECK(has_code(d.error(), errc::out_of_memory));
  }
  SECTION("one output of 40 MiB fits") {
    auto small = tensor::zeros(dtype::float32, {10 * MiB / 4});
    per_replica<tensor> fits{{small, small}};
    CHECK(s.all_reduce(reduce_op::sum, fits));
    CHECK(s.reduce(reduce_op::sum, fits));
    CHECK(s.gather(fits, 0));
  }
}

TEST_CASE("memory: restore checks the file against the strategy's budget") {
  auto dir = fs::temp_directory_path()
             / ("varsync_memory_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  auto path = (dir / "w.safetensors").string();
  {
    auto writer = budget_strategy(1, 0);
    auto w = make_var(writer, "w", tensor::zeros(dtype::float32, {MiB}),
                      synchronization::on_write, aggregation::sum);
    (void) w;
    VS_REQUIRE_OK(save(writer, path));
  }
  // 4 MiB of data: the file and its decoded tensors take about 8 MiB.
  auto s = budget_strategy(1, 6 * MiB);
  auto w = make_var(s, "w", tensor::filled(dtype::float32, {MiB}, 3.0),
                    synchronization::on_write, aggregation::sum);
  auto err = restore(s, path);
  INFO(describe(err));
  CHECK(has_code(err, errc::out_of_memory));
  CHECK(mentions(err, "w.safetensors"));
  CHECK(VS_VALUE(s.read(w)).as_double(0) == 3.0);
  fs::remove_all(dir);
}

// The automatic budget: without it, a variable whose components together
// exceed the memory left is allocated (overcommit) and the process is killed
// when the replicas copy the initial value into them.
TEST_CASE("memory: the automatic budget refuses a variable larger than "
          "memory + swap") {
  if (VS_MEM_SANITIZED) {
    WARN("skipped in a sanitizer build: its allocator aborts on huge requests");
    return;
  }
  uint64_t total = 0, available = 0;
  {
    std::ifstream mi{"/proc/meminfo"};
    std::string key, unit;
    uint64_t kib = 0;
    while (mi >> key >> kib >> unit) {
      if (key == "MemTotal:")
        total = kib << 10;
      if (key == "MemAvailable:" || key == "SwapFree:")
        available += kib << 10;
    }
  }
  if (total == 0) {
    WARN("skipped: no /proc/meminfo");
    return;
  }
  // Each component a power of two (the tensor pool's size class) of at most
  // half the machine, so that the kernel grants the untouched initial value;
  // enough replicas that all of them exceed memory + swap twice over.
  uint64_t each = uint64_t{1} << 20;
  while (each * 2 <= total / 2)
    each *= 2;
  auto replicas = static_cast<int>(2 * available / each + 2);
  if (replicas > 64) {
    WARN("skipped: memory + swap is too large for 64 replicas of "
         << each << " bytes");
    return;
  }
  tensor initial;
  try {
    initial = tensor::empty(dtype::float32,
                            {static_cast<int64_t>(each / 4)});
  } catch (const std::bad_alloc&) {
    WARN("skipped: the kernel refuses " << each
                                        << " bytes of address space (strict "
                                           "overcommit)");
    return;
  }
  auto s = budget_strategy(replicas, 0);
  auto held = host_component_bytes();
  auto v = s.create_variable("huge", initial, synchronization::on_write,
                             aggregation::sum);
  REQUIRE_FALSE(v);
  INFO(describe(v.error()));
  CHECK(has_code(v.error(), errc::out_of_memory));
  CHECK(mentions(v.error(), "'huge'"));
  CHECK(mentions(v.error(), "memory available"));
  CHECK(host_component_bytes() == held);
  CHECK(VS_VALUE(s.variables()).empty());
}
