#include "../semantics/fixture.hpp"

#include <atomic>
#include <condition_variable>
#include <mutex>

using namespace vs_test;

namespace {

// Counts callbacks and wakes the test thread when all have arrived.
struct completion_counter {
  std::mutex mtx;
  std::condition_variable cv;
  int done = 0;
  int failed = 0;

  void add(bool ok) {
    std::lock_guard<std::mutex> guard{mtx};
    ++done;
    if (!ok)
      ++failed;
    cv.notify_all();
  }

  bool wait_for(int n, std::chrono::seconds limit) {
    std::unique_lock<std::mutex> guard{mtx};
    return cv.wait_for(guard, limit, [&] { return done == n; });
  }
};

} // namespace

TEST_CASE("admission: a burst of thousands of async calls completes in "
          "issue order with nothing lost") {
  // 10,000 calls outstanding at once: beyond the default bound (V3, 4096),
  // so this strategy admits them all (tests/reliability/overload_test.cpp
  // covers the refusals).
  strategy_options options;
  options.devices = test_devices(4);
  options.timeout = 60s;
  options.scheduler_threads = 2;
  options.max_queued_operations = 10000;
  auto s = VS_VALUE(strategy::create(options));
  auto counter = make_var(s, "counter", tensor::scalar<int64_t>(0),
                          synchronization::on_write, aggregation::sum);
  auto last = make_var(s, "last", tensor::scalar<int64_t>(0),
                       synchronization::on_write);
  constexpr int n = 5000;
  completion_counter completions;
  auto async = s.async();
  for (int i = 1; i <= n; ++i) {
    async.assign_add(counter, tensor::scalar<int64_t>(1),
                     [&](caf::error err) { completions.add(!err); });
    async.assign(last, tensor::scalar<int64_t>(i),
                 [&](caf::error err) { completions.add(!err); });
  }
  REQUIRE(completions.wait_for(2 * n, 60s));
  CHECK(completions.failed == 0);
  CHECK(components(s, counter) == std::vector<double>(4, n));
  // One caller's requests apply in the order it issued them.
  CHECK(components(s, last) == std::vector<double>(4, n));
}

TEST_CASE("admission: thousands of async creations all succeed") {
  auto s = make_strategy(4, 60s);
  constexpr int n = 3000;
  completion_counter completions;
  auto async = s.async();
  for (int i = 0; i < n; ++i) {
    variable_spec spec;
    spec.name = "v" + std::to_string(i);
    spec.initial_value = tensor::scalar<float>(static_cast<float>(i));
    async.create_variable(std::move(spec), [&](caf::expected<variable> v) {
      completions.add(static_cast<bool>(v));
    });
  }
  REQUIRE(completions.wait_for(n, 60s));
  CHECK(completions.failed == 0);
  CHECK(VS_VALUE(s.variables()).size() == n);
  CHECK(read_scalar(s, VS_VALUE(s.lookup("v2999"))) == 2999);
}
