#include "fixture.hpp"

#include <atomic>
#include <cstring>
#include <thread>

using namespace vs_test;

namespace {

const aggregation all_aggregations[] = {aggregation::none, aggregation::sum,
                                        aggregation::mean,
                                        aggregation::only_first_replica};

} // namespace

TEST_CASE("W1: a replica-context read by replica r returns component r") {
  auto s = make_strategy(4);
  auto v = make_var(s, "w", tensor::scalar<float>(3), synchronization::on_write);
  struct seen_t {
    device_id device;
    uintptr_t component = 0; // where the component lives (device_pointer)
    bool in_place = false;   // host replica: read() is the component itself
    double value = 0;
  };
  auto seen = VS_VALUE(s.run([&](replica_context& ctx) {
    auto view = ctx.read(v);
    auto where = ctx.device_pointer(v);
    if (!view || !where)
      throw std::runtime_error("read / device_pointer failed");
    seen_t out;
    out.device = where->device;
    out.component = reinterpret_cast<uintptr_t>(where->data);
    out.in_place = view->data == where->data;
    out.value = static_cast<double>(view->as<float>()[0]);
    return out;
  }));
  // This process's replicas (all four in one process).
  REQUIRE(seen.size() == static_cast<size_t>(s.num_local_replicas()));
  for (size_t r = 0; r < seen.size(); ++r) {
    CHECK(seen[r].value == 3.0);
    // Host replicas read their own component without a copy (on cuda:K
    // replicas read() is a host copy, whose address says nothing).
    if (seen[r].device.kind == device_kind::host)
      CHECK(seen[r].in_place);
    for (size_t q = 0; q < r; ++q) // each replica owns its own memory
      CHECK((seen[r].device != seen[q].device
             || seen[r].component != seen[q].component));
  }
}

TEST_CASE("W2: a cross-replica read returns the primary component") {
  auto s = make_strategy(3);
  auto v = make_var(s, "w", tensor::from_vector<int64_t>({2}, {7, -9}),
                    synchronization::on_write);
  auto value = VS_VALUE(s.read(v));
  CHECK(value.to_vector<int64_t>() == std::vector<int64_t>{7, -9});
  CHECK(value.bitwise_equal(VS_VALUE(s.local_values(v))[0]));
}

TEST_CASE("W3: cross-replica updates apply x to every component whatever the "
          "aggregation") {
  auto s = make_strategy(4);
  int k = 0;
  for (auto agg : all_aggregations) {
    INFO("aggregation " << to_string(agg));
    auto v = make_var(s, "w" + std::to_string(k++), tensor::scalar<float>(10),
                      synchronization::on_write, agg);
    VS_REQUIRE_OK(s.assign(v, 8.0));
    CHECK(components(s, v) == std::vector<double>(4, 8.0));
    VS_REQUIRE_OK(s.assign_add(v, 4.0));
    CHECK(components(s, v) == std::vector<double>(4, 12.0));
    VS_REQUIRE_OK(s.assign_sub(v, 2.0));
    CHECK(components(s, v) == std::vector<double>(4, 10.0));
  }
}

TEST_CASE("W4: replica-context updates combine the contributions per "
          "aggregation") {
  auto s = make_strategy(4);
  // Replica r contributes r + 1: sum 10, mean 2.5, first 1.
  auto contribute = [&](const variable& v, update_op op) {
    return s.run([&](replica_context& ctx) {
      VS_STEP_OK(ctx.update(
        v, op, tensor::scalar<double>(ctx.replica_id() + 1.0)));
    });
  };
  struct row {
    aggregation agg;
    double y;
  };
  int k = 0;
  for (auto [agg, y] : {row{aggregation::sum, 10}, row{aggregation::mean, 2.5},
                        row{aggregation::only_first_replica, 1}}) {
    INFO("aggregation " << to_string(agg));
    auto v = make_var(s, "w" + std::to_string(k++), tensor::scalar<double>(100),
                      synchronization::on_write, agg);
    VS_REQUIRE_OK(contribute(v, update_op::assign_add));
    CHECK(components(s, v) == std::vector<double>(4, 100 + y));
    VS_REQUIRE_OK(contribute(v, update_op::assign_sub));
    CHECK(components(s, v) == std::vector<double>(4, 100));
    VS_REQUIRE_OK(contribute(v, update_op::assign));
    CHECK(components(s, v) == std::vector<double>(4, y));
  }
  SECTION("none with equal contributions applies x_0") {
    auto v = make_var(s, "n", tensor::scalar<double>(1),
                      synchronization::on_write, aggregation::none);
    VS_REQUIRE_OK(s.run(
      [&](replica_context& ctx) { VS_STEP_OK(ctx.assign_add(v, 5.0)); }));
    CHECK(components(s, v) == std::vector<double>(4, 6));
  }
  SECTION("none with differing contributions fails and changes nothing "
          "(TF differs)") {
    auto v = make_var(s, "n", tensor::scalar<double>(1),
                      synchronization::on_write, aggregation::none);
    auto before = take_snapshot(s);
    auto err = contribute(v, update_op::assign_add);
    VS_CHECK_CODE(err, aggregation_required);
    CHECK(message_of(err).find("'n'") != std::string::npos);
    CHECK(same(before, take_snapshot(s)));
  }
}

TEST_CASE("W5: contributions are values: N equal contributions to a sum add "
          "up to N·x (TF differs)") {
  auto s = make_strategy(4);
  auto v = make_var(s, "w", tensor::from_vector<float>({2}, {0, 0}),
                    synchronization::on_write, aggregation::sum);
  auto x = tensor::from_vector<float>({2}, {1.5f, -2});
  VS_REQUIRE_OK(s.run(
    [&](replica_context& ctx) { VS_STEP_OK(ctx.assign_add(v, x)); }));
  auto value = VS_VALUE(s.read(v));
  CHECK(value.to_vector<float>() == std::vector<float>{6, -8});
}

TEST_CASE("W6: replicas issuing different update sequences fail the step and "
          "apply none of its updates") {
  auto s = make_strategy(3);
  auto a = make_var(s, "a", tensor::scalar<float>(1), synchronization::on_write,
                    aggregation::sum);
  auto b = make_var(s, "b", tensor::scalar<float>(1), synchronization::on_write,
                    aggregation::sum);
  auto before = take_snapshot(s);
  SECTION("different variables") {
    auto err = s.run([&](replica_context& ctx) {
      VS_STEP_OK(ctx.assign_add(a, 1.0));
      VS_STEP_OK(ctx.assign_add(ctx.replica_id() == 2 ? a : b, 1.0));
    });
    VS_CHECK_CODE(err, mismatched_replica_updates);
  }
  SECTION("different ops") {
    auto err = s.run([&](replica_context& ctx) {
      VS_STEP_OK(ctx.assign_add(a, 1.0));
      if (ctx.replica_id() == 1)
        VS_STEP_OK(ctx.assign_sub(b, 1.0));
      else
        VS_STEP_OK(ctx.assign_add(b, 1.0));
    });
    VS_CHECK_CODE(err, mismatched_replica_updates);
  }
  SECTION("different counts") {
    auto err = s.run([&](replica_context& ctx) {
      VS_STEP_OK(ctx.assign_add(a, 1.0));
      if (ctx.replica_id() == 0)
        VS_STEP_OK(ctx.assign_add(b, 1.0));
    });
    VS_CHECK_CODE(err, mismatched_replica_updates);
  }
  CHECK(same(before, take_snapshot(s)));
}

TEST_CASE("W7: all components of an on_write variable stay bitwise equal "
          "after every operation") {
  auto s = make_strategy(4);
  auto v = make_var(s, "w", tensor::from_vector<float>({3}, {0.1f, 0.2f, 0.3f}),
                    synchronization::on_write, aggregation::mean);
  auto x = tensor::from_vector<float>({3}, {1e-3f, 3.3f, -7.1f});
  for (int i = 0; i < 20; ++i) {
    VS_REQUIRE_OK(s.assign_add(v, x));
    CHECK(all_components_equal(s, v));
    // Contributions differ per replica; the mean must still be applied
    // identically to every component.
    VS_REQUIRE_OK(s.run([&](replica_context& ctx) {
      auto c = tensor::from_vector<float>(
        {3}, {0.37f * ctx.replica_id(), 1.0f / (ctx.replica_id() + 3.0f),
              -0.11f});
      VS_STEP_OK(ctx.assign_sub(v, c));
    }));
    CHECK(all_components_equal(s, v));
  }
}

TEST_CASE("W8: 8 concurrent callers x 10000 assign_add(1) on 4 replicas end "
          "at exactly 80000 everywhere", "[one-process]") {
  auto s = make_strategy(4, 60s);
  auto v = make_var(s, "counter", tensor::scalar<int64_t>(0),
                    synchronization::on_write, aggregation::sum);
  constexpr int callers = 8;
  constexpr int per_caller = 10000;
  std::atomic<int> failures{0};
  std::atomic<bool> done{false};
  std::atomic<int> unequal_snapshots{0};
  std::atomic<int> snapshots{0};
  // W7 along the way: no local_values snapshot shows replicas apart.
  std::thread checker([&] {
    while (!done.load()) {
      auto values = s.local_values(v);
      if (!values) {
        ++failures;
        continue;
      }
      ++snapshots;
      for (auto& c : *values)
        if (!c.bitwise_equal((*values)[0]))
          ++unequal_snapshots;
    }
  });
  std::vector<std::thread> threads;
  for (int t = 0; t < callers; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < per_caller; ++i)
        if (s.assign_add(v, 1.0))
          ++failures;
    });
  for (auto& t : threads)
    t.join();
  done = true;
  checker.join();
  CHECK(failures.load() == 0);
  CHECK(unequal_snapshots.load() == 0);
  CHECK(snapshots.load() > 0);
  CHECK(components(s, v) == std::vector<double>(4, 80000));
}

TEST_CASE("W8: a read issued after an update completed observes it, "
          "concurrent writers are applied in one order everywhere") {
  auto s = make_strategy(4);
  auto v = make_var(s, "w", tensor::scalar<int64_t>(0),
                    synchronization::on_write);
  for (int i = 1; i <= 200; ++i) {
    VS_REQUIRE_OK(s.assign(v, static_cast<double>(i)));
    REQUIRE(read_scalar(s, v) == i);
  }
  // Two writers race with assign: whichever is last, every component agrees.
  std::thread a([&] {
    for (int i = 0; i < 2000; ++i)
      (void) s.assign(v, 1.0);
  });
  std::thread b([&] {
    for (int i = 0; i < 2000; ++i)
      (void) s.assign(v, 2.0);
  });
  a.join();
  b.join();
  CHECK(all_components_equal(s, v));
}
