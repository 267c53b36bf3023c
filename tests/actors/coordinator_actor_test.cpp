// Actor-level tests of the coordinator actor (actors/coordinator/coordinator_actor.hpp),
// driven through its typed interface (messages/coordinator_interface.hpp) as a
// user's actor would drive it, over four host replicas; plus the embedding of
// a strategy into the user's actor system. No GPU.

#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <limits>
#include <future>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <caf/actor_cast.hpp>
#include <caf/after.hpp>
#include <caf/binary_deserializer.hpp>
#include <caf/binary_serializer.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/exit_reason.hpp>
#include <caf/system_messages.hpp>

#include "actor_fixture.hpp"
#include "actors/actor_thread.hpp"
#include "actors/coordinator/coordinator_actor.hpp"
#include "varsync/error.hpp"
#include "varsync/tensor.hpp"
#include "messages/atoms.hpp"
#include "messages/coordinator_interface.hpp"
#include "varsync/function_step.hpp"
#include "varsync/internal/step_report.hpp"
#include "varsync/step_task.hpp"
#include "varsync/strategy_description.hpp"
#include "varsync/variable.hpp"
#include "varsync/actor_api.hpp"
#include "varsync/ext/checkpoint_actor.hpp"
#include "varsync/replica_context.hpp"
#include "varsync/strategy.hpp"
#include "varsync/ext/testing.hpp"

using namespace varsync;
using varsync::test::actor_fixture;
using varsync::test::describe_result;

namespace {

constexpr int num_devices = 4;

struct coordinator_fixture : actor_fixture {
  coordinator_internal_actor coord;

  explicit coordinator_fixture(
    caf::timespan timeout = std::chrono::seconds(5)) {
    coordinator_config cc;
    for (int i = 0; i < num_devices; ++i)
      cc.devices.push_back(device_id{device_kind::host, i});
    cc.default_timeout = timeout;
    auto c = spawn_coordinator(sys, cc);
    REQUIRE(c);
    coord = *c;
    // Its replicas go down with it.
    stop_at_end(coord);
  }

  variable_info create(std::string name, tensor initial,
                       synchronization sync = synchronization::auto_,
                       aggregation agg = aggregation::none) {
    variable_spec spec;
    spec.name = std::move(name);
    spec.initial_value = std::move(initial);
    spec.sync = sync;
    spec.agg = agg;
    auto res = ask<variable_info>(coord, create_atom::value, spec);
    INFO(describe_result(res));
    REQUIRE(res);
    return *res;
  }

  caf::expected<variable_info> try_create(variable_spec spec) {
    return ask<variable_info>(coord, create_atom::value, spec);
  }

  tensor read(uint64_t id) {
    auto res = ask<tensor>(coord, read_atom::value, id);
    INFO(describe_result(res));
    REQUIRE(res);
    return *res;
  }

  caf::error update(uint64_t id, update_op op, const tensor& x) {
    auto res = ask<ok_atom>(coord, update_atom::value, id, op, x);
    return res ? caf::error{} : res.error();
  }

  std::vector<tensor> values(uint64_t id) {
    auto res = ask<std::vector<tensor>>(coord, values_atom::value, id);
    INFO(describe_result(res));
    REQUIRE(res);
    return *res;
  }

  template <class T>
  std::vector<std::vector<T>> component_values(uint64_t id) {
    std::vector<std::vector<T>> out;
    for (auto& t : values(id))
      out.push_back(t.template to_vector<T>());
    return out;
  }

  std::vector<replica_actor> replicas() {
    auto res = ask<std::vector<replica_actor>>(coord, replicas_atom::value);
    REQUIRE(res);
    return *res;
  }

  /// Kills replica `r` and waits until it is gone.
  void kill_replica(int r) {
    auto rs = replicas();
    REQUIRE(rs.size() == static_cast<size_t>(num_devices));
    auto victim = rs[static_cast<size_t>(r)];
    self->monitor(victim);
    self->send_exit(victim, caf::exit_reason::kill);
    bool down = false;
    self->receive(
      [&](caf::down_msg& msg) {
        down = msg.source == caf::actor_cast<caf::actor_addr>(victim);
      },
      caf::after(test::reply_deadline) >> [] {});
    REQUIRE(down);
  }
};

template <class T>
std::vector<std::vector<T>> repeat(std::vector<T> x, int n = num_devices) {
  return std::vector<std::vector<T>>(static_cast<size_t>(n), x);
}

/// A replica step: replica r contributes `base + r` to an assign_add of `v`.
struct contribute_step final : replica_step {
  contribute_step(variable v, double b) : var(std::move(v)), base(b) {
  }
  void run(replica_context& ctx) override {
    auto x = tensor::filled(var.type(), var.shape(),
                            base + ctx.replica_id());
    (void) ctx.assign_add(var, x);
  }
  variable var;
  double base;
};

/// A replica step in which only replica 0 updates `v` (W6).
struct lopsided_step final : replica_step {
  explicit lopsided_step(variable v) : var(std::move(v)) {
  }
  void run(replica_context& ctx) override {
    if (ctx.replica_id() == 0)
      (void) ctx.assign_add(var, tensor::filled(var.type(), var.shape(), 1));
  }
  variable var;
};

/// A replica step in which replica `slow` sleeps for `nap` (a stuck device).
struct sleepy_step final : replica_step {
  sleepy_step(variable v, int s, std::chrono::milliseconds n)
    : var(std::move(v)), slow(s), nap(n) {
  }
  void run(replica_context& ctx) override {
    if (ctx.replica_id() == slow)
      std::this_thread::sleep_for(nap);
    (void) ctx.assign_add(var, tensor::filled(var.type(), var.shape(), 1));
  }
  variable var;
  int slow;
  std::chrono::milliseconds nap;
};

struct short_deadline_fixture : coordinator_fixture {
  short_deadline_fixture()
    : coordinator_fixture(std::chrono::milliseconds(300)) {
  }
};

} // namespace

// -- registry -----------------------------------------------------------------------

TEST_CASE_METHOD(coordinator_fixture,
                 "C1: coordinator actor: create resolves auto to on_write and "
                 "returns the variable_info",
                 "[coordinator]") {
  auto info = create("weights", tensor::from_list<float>({1.f, 2.f}));
  CHECK(info.name == "weights");
  CHECK(info.type == dtype::float32);
  CHECK(info.shape == tensor_shape{2});
  CHECK(info.sync == synchronization::on_write);
  CHECK(info.agg == aggregation::none);
  CHECK(info.trainable); // C4 default for on_write
  auto metric = create("metric", tensor::scalar<int64_t>(0),
                       synchronization::on_read, aggregation::sum);
  CHECK(metric.sync == synchronization::on_read);
  CHECK_FALSE(metric.trainable); // C4 default for on_read
  CHECK(metric.id != info.id);
}

TEST_CASE_METHOD(coordinator_fixture,
                 "C10, P14: coordinator actor: wait_for answers when the "
                 "variable is created, barrier at once in one process",
                 "[coordinator]") {
  auto existing = create("a", tensor::scalar<float>(1.f));
  auto now = ask<variable_info>(coord, wait_for_atom::value, std::string{"a"});
  REQUIRE(now);
  CHECK(now->id == existing.id);
  // Two waiters for a name nobody has created yet; a create while they
  // wait (a wait holds no admission slot) answers both.
  auto first = self->request(coord, test::reply_deadline, wait_for_atom::value,
                             std::string{"b"});
  auto second = self->request(coord, test::reply_deadline,
                              wait_for_atom::value, std::string{"b"});
  auto b = create("b", tensor::scalar<float>(2.f));
  int answered = 0;
  auto expect_b = [&](variable_info& x) {
    CHECK(x.id == b.id);
    ++answered;
  };
  auto unexpected = [&](caf::error& e) { FAIL_CHECK(describe(e)); };
  first.receive(expect_b, unexpected);
  second.receive(expect_b, unexpected);
  CHECK(answered == 2);
  auto empty = ask<variable_info>(coord, wait_for_atom::value, std::string{});
  REQUIRE_FALSE(empty);
  CHECK(has_code(empty.error(), errc::invalid_argument));
  CHECK(ask<ok_atom>(coord, barrier_atom::value));
}

TEST_CASE_METHOD(coordinator_fixture,
                 "P15: coordinator actor: agree answers this process's "
                 "outcome at once in one process",
                 "[coordinator]") {
  CHECK(ask<ok_atom>(coord, agree_atom::value, caf::error{},
                     std::string{"a save"}));
  auto failed = ask<ok_atom>(coord, agree_atom::value,
                             make_error(errc::out_of_memory, "no room"),
                             std::string{"a save"});
  REQUIRE_FALSE(failed);
  CHECK(has_code(failed.error(), errc::out_of_memory));
  CHECK(message_of(failed.error()) == "no room");
}

TEST_CASE_METHOD(coordinator_fixture,
                 "coordinator actor: lookup and list find created variables, "
                 "list sorted by name",
                 "[coordinator]") {
  auto b = create("b", tensor::scalar<float>(1.f));
  auto a = create("a", tensor::scalar<float>(2.f));
  auto found = ask<variable_info>(coord, lookup_atom::value, std::string{"b"});
  REQUIRE(found);
  CHECK(found->id == b.id);
  CHECK(found->name == "b");
  auto missing = ask<variable_info>(coord, lookup_atom::value,
                                    std::string{"nope"});
  REQUIRE_FALSE(missing);
  CHECK(has_code(missing.error(), errc::unknown_variable));
  auto all = ask<std::vector<variable_info>>(coord, list_atom::value);
  REQUIRE(all);
  REQUIRE(all->size() == 2);
  CHECK((*all)[0].name == "a");
  CHECK((*all)[0].id == a.id);
  CHECK((*all)[1].name == "b");
}

TEST_CASE_METHOD(coordinator_fixture,
                 "coordinator actor: destroy removes a variable and later "
                 "requests for it fail with unknown_variable",
                 "[coordinator]") {
  auto v = create("tmp", tensor::scalar<int32_t>(3));
  REQUIRE(ask<ok_atom>(coord, destroy_atom::value, v.id));
  auto rd = ask<tensor>(coord, read_atom::value, v.id);
  REQUIRE_FALSE(rd);
  CHECK(has_code(rd.error(), errc::unknown_variable));
  auto again = ask<ok_atom>(coord, destroy_atom::value, v.id);
  REQUIRE_FALSE(again);
  CHECK(has_code(again.error(), errc::unknown_variable));
  auto lk = ask<variable_info>(coord, lookup_atom::value, std::string{"tmp"});
  REQUIRE_FALSE(lk);
  CHECK(has_code(lk.error(), errc::unknown_variable));
  auto all = ask<std::vector<variable_info>>(coord, list_atom::value);
  REQUIRE(all);
  CHECK(all->empty());
  // The name is free again.
  auto again_created = create("tmp", tensor::scalar<int32_t>(5));
  CHECK(read(again_created.id).to_vector<int32_t>() == std::vector<int32_t>{5});
}

TEST_CASE_METHOD(coordinator_fixture,
                 "coordinator actor: describe names the devices and replicas "
                 "answers one replica per device",
                 "[coordinator]") {
  auto d = ask<strategy_description>(coord, describe_atom::value);
  REQUIRE(d);
  CHECK(d->devices
        == std::vector<std::string>{"cpu:0", "cpu:1", "cpu:2", "cpu:3"});
  CHECK_FALSE(d->collective.empty());
  auto rs = replicas();
  REQUIRE(rs.size() == static_cast<size_t>(num_devices));
  for (auto& r : rs)
    CHECK(r);
  // The replicas hold the components: replica 2 answers a local read.
  auto v = create("x", tensor::scalar<float>(6.f));
  auto local = ask<tensor>(rs[2], local_read_atom::value, v.id);
  REQUIRE(local);
  CHECK(local->to_vector<float>() == std::vector<float>{6.f});
}

// -- reads and updates ------------------------------------------------------------

TEST_CASE_METHOD(coordinator_fixture,
                 "V1/W3: coordinator actor: an on_write update applies x to "
                 "every component, read returns the primary",
                 "[coordinator]") {
  auto v = create("w", tensor::from_list<float>({1.f, 2.f}),
                  synchronization::on_write, aggregation::mean);
  CHECK(component_values<float>(v.id) == repeat<float>({1.f, 2.f}));
  REQUIRE_FALSE(update(v.id, update_op::assign_add,
                       tensor::from_list<float>({0.5f, 4.f})));
  CHECK(read(v.id).to_vector<float>() == std::vector<float>{1.5f, 6.f});
  CHECK(component_values<float>(v.id) == repeat<float>({1.5f, 6.f}));
  REQUIRE_FALSE(update(v.id, update_op::assign_sub,
                       tensor::from_list<float>({1.5f, 1.f})));
  CHECK(component_values<float>(v.id) == repeat<float>({0.f, 5.f}));
  REQUIRE_FALSE(update(v.id, update_op::assign,
                       tensor::from_list<float>({9.f, 5.f})));
  CHECK(component_values<float>(v.id) == repeat<float>({9.f, 5.f}));
}

TEST_CASE_METHOD(coordinator_fixture,
                 "R3/R4/R5: coordinator actor: an on_read sum variable reads "
                 "the sum, splits assign exactly and adds to component 0",
                 "[coordinator]") {
  auto v = create("count", tensor::scalar<int32_t>(1),
                  synchronization::on_read, aggregation::sum);
  // C6: every component starts at 1, the cross-replica read is N * 1.
  CHECK(read(v.id).to_vector<int32_t>() == std::vector<int32_t>{4});
  REQUIRE_FALSE(update(v.id, update_op::assign_add, tensor::scalar<int32_t>(3)));
  CHECK(component_values<int32_t>(v.id)
        == std::vector<std::vector<int32_t>>{{4}, {1}, {1}, {1}});
  CHECK(read(v.id).to_vector<int32_t>() == std::vector<int32_t>{7});
  REQUIRE_FALSE(update(v.id, update_op::assign, tensor::scalar<int32_t>(10)));
  CHECK(component_values<int32_t>(v.id)
        == std::vector<std::vector<int32_t>>{{3}, {3}, {2}, {2}});
  CHECK(read(v.id).to_vector<int32_t>() == std::vector<int32_t>{10});
}

TEST_CASE_METHOD(coordinator_fixture,
                 "N3: coordinator actor: a cross-replica read of a none "
                 "variable fails with no_cross_replica_value",
                 "[coordinator]") {
  auto v = create("local", tensor::scalar<float>(2.f), synchronization::none,
                  aggregation::none);
  auto rd = ask<tensor>(coord, read_atom::value, v.id);
  REQUIRE_FALSE(rd);
  CHECK(has_code(rd.error(), errc::no_cross_replica_value));
  // V1: the local values are still there.
  CHECK(component_values<float>(v.id) == repeat<float>({2.f}));
}

// -- bad requests (V2: nothing changes) -------------------------------------------

TEST_CASE_METHOD(coordinator_fixture,
                 "C7: coordinator actor: creating an existing name fails with "
                 "already_exists and leaves the first variable unchanged",
                 "[coordinator]") {
  auto v = create("dup", tensor::scalar<float>(1.f));
  variable_spec spec;
  spec.name = "dup";
  spec.initial_value = tensor::scalar<float>(99.f);
  auto res = try_create(spec);
  REQUIRE_FALSE(res);
  CHECK(has_code(res.error(), errc::already_exists));
  CHECK(component_values<float>(v.id) == repeat<float>({1.f}));
  auto all = ask<std::vector<variable_info>>(coord, list_atom::value);
  REQUIRE(all);
  CHECK(all->size() == 1);
}

TEST_CASE_METHOD(coordinator_fixture,
                 "C3: coordinator actor: none synchronization with sum "
                 "aggregation fails with invalid_argument and creates nothing",
                 "[coordinator]") {
  variable_spec spec;
  spec.name = "bad";
  spec.initial_value = tensor::scalar<float>(1.f);
  spec.sync = synchronization::none;
  spec.agg = aggregation::sum;
  auto res = try_create(spec);
  REQUIRE_FALSE(res);
  CHECK(has_code(res.error(), errc::invalid_argument));
  auto lk = ask<variable_info>(coord, lookup_atom::value, std::string{"bad"});
  REQUIRE_FALSE(lk);
  CHECK(has_code(lk.error(), errc::unknown_variable));
}

TEST_CASE_METHOD(coordinator_fixture,
                 "C4/C5: coordinator actor: trainable on_read and integer mean "
                 "fail with invalid_argument",
                 "[coordinator]") {
  variable_spec a;
  a.name = "a";
  a.initial_value = tensor::scalar<float>(1.f);
  a.sync = synchronization::on_read;
  a.agg = aggregation::sum;
  a.trainable = true;
  auto ra = try_create(a);
  REQUIRE_FALSE(ra);
  CHECK(has_code(ra.error(), errc::invalid_argument));
  variable_spec b;
  b.name = "b";
  b.initial_value = tensor::scalar<int32_t>(1);
  b.sync = synchronization::on_write;
  b.agg = aggregation::mean;
  auto rb = try_create(b);
  REQUIRE_FALSE(rb);
  CHECK(has_code(rb.error(), errc::invalid_argument));
  auto all = ask<std::vector<variable_info>>(coord, list_atom::value);
  REQUIRE(all);
  CHECK(all->empty());
}

TEST_CASE_METHOD(coordinator_fixture,
                 "C7/V2: coordinator actor: updates with the wrong dtype or "
                 "shape fail and leave every component unchanged",
                 "[coordinator]") {
  auto w = create("w", tensor::from_list<float>({1.f, 2.f, 3.f}),
                  synchronization::on_write, aggregation::sum);
  auto m = create("m", tensor::from_list<float>({1.f, 2.f, 3.f}),
                  synchronization::on_read, aggregation::sum);
  for (auto id : {w.id, m.id}) {
    for (auto op :
         {update_op::assign, update_op::assign_add, update_op::assign_sub}) {
      auto e1 = update(id, op, tensor::from_list<double>({1.0, 2.0, 3.0}));
      CHECK(has_code(e1, errc::dtype_mismatch));
      auto e2 = update(id, op, tensor::from_list<float>({1.f, 2.f}));
      CHECK(has_code(e2, errc::shape_mismatch));
      auto e3 = update(id, op, tensor::scalar<float>(1.f));
      CHECK(has_code(e3, errc::shape_mismatch));
    }
    CHECK(component_values<float>(id) == repeat<float>({1.f, 2.f, 3.f}));
  }
}

TEST_CASE_METHOD(coordinator_fixture,
                 "coordinator actor: requests for an unknown id fail with "
                 "unknown_variable",
                 "[coordinator]") {
  uint64_t missing = 12345;
  auto rd = ask<tensor>(coord, read_atom::value, missing);
  REQUIRE_FALSE(rd);
  CHECK(has_code(rd.error(), errc::unknown_variable));
  auto up = update(missing, update_op::assign, tensor::scalar<float>(1.f));
  CHECK(has_code(up, errc::unknown_variable));
  auto vs = ask<std::vector<tensor>>(coord, values_atom::value, missing);
  REQUIRE_FALSE(vs);
  CHECK(has_code(vs.error(), errc::unknown_variable));
  auto ds = ask<ok_atom>(coord, destroy_atom::value, missing);
  REQUIRE_FALSE(ds);
  CHECK(has_code(ds.error(), errc::unknown_variable));
}

// -- steps and all-reduce ----------------------------------------------------------

TEST_CASE_METHOD(coordinator_fixture,
                 "W4: coordinator actor: run applies the summed contributions "
                 "of a step to every component",
                 "[coordinator][step]") {
  auto info = create("w", tensor::scalar<double>(0.0), synchronization::on_write,
                     aggregation::sum);
  auto step = std::make_shared<contribute_step>(variable{info}, 1.0);
  auto res = ask<ok_atom>(coord, run_atom::value, replica_step_ptr{step});
  INFO(describe_result(res));
  REQUIRE(res);
  // 1 + 2 + 3 + 4.
  CHECK(component_values<double>(info.id) == repeat<double>({10.0}));
}

TEST_CASE_METHOD(coordinator_fixture,
                 "coordinator actor: make_step turns a lambda into a step and "
                 "its per-replica results are taken after the ok reply",
                 "[coordinator][step]") {
  auto info = create("w", tensor::scalar<double>(0.0), synchronization::on_write,
                     aggregation::sum);
  variable w{info};
  auto made = make_step(
    [w](replica_context& ctx) {
      if (auto err = ctx.assign_add(w, 1.0))
        throw std::runtime_error(describe(err));
      return ctx.replica_id() + 100;
    },
    num_devices);
  auto res = ask<ok_atom>(coord, run_atom::value, made.step);
  INFO(describe_result(res));
  REQUIRE(res);
  CHECK(made.results->take().values() == std::vector<int>{100, 101, 102, 103});
  CHECK(component_values<double>(info.id) == repeat<double>({4.0}));
}

TEST_CASE_METHOD(coordinator_fixture,
                 "coordinator actor: make_step of a void lambda is a plain "
                 "replica_step_ptr",
                 "[coordinator][step]") {
  auto info = create("w", tensor::scalar<double>(0.0), synchronization::on_write,
                     aggregation::sum);
  variable w{info};
  replica_step_ptr step = make_step(
    [w](replica_context& ctx) {
      if (auto err = ctx.assign_add(w, double(ctx.replica_id())))
        throw std::runtime_error(describe(err));
    },
    num_devices);
  auto res = ask<ok_atom>(coord, run_atom::value, step);
  INFO(describe_result(res));
  REQUIRE(res);
  // 0 + 1 + 2 + 3.
  CHECK(component_values<double>(info.id) == repeat<double>({6.0}));
}

TEST_CASE_METHOD(coordinator_fixture,
                 "W6: coordinator actor: a step whose replicas issue different "
                 "on_write updates fails with mismatched_replica_updates",
                 "[coordinator][step]") {
  auto info = create("w", tensor::scalar<float>(1.f), synchronization::on_write,
                     aggregation::sum);
  auto res = ask<ok_atom>(coord, run_atom::value,
                          replica_step_ptr{
                            std::make_shared<lopsided_step>(variable{info})});
  REQUIRE_FALSE(res);
  CHECK(has_code(res.error(), errc::mismatched_replica_updates));
  CHECK(component_values<float>(info.id) == repeat<float>({1.f}));
}

TEST_CASE_METHOD(coordinator_fixture,
                 "D8: coordinator actor: allreduce sums per-replica values",
                 "[coordinator]") {
  std::vector<tensor> group;
  for (int r = 0; r < num_devices; ++r)
    group.push_back(tensor::from_list<float>(
      {static_cast<float>(r), 10.f * static_cast<float>(r)}));
  std::vector<std::vector<tensor>> values{group};
  auto res = ask<std::vector<tensor>>(coord, allreduce_atom::value,
                                      reduce_op::sum, values);
  INFO(describe_result(res));
  REQUIRE(res);
  REQUIRE(res->size() == 1);
  CHECK((*res)[0].to_vector<float>() == std::vector<float>{6.f, 60.f});
}

// -- failures -----------------------------------------------------------------

TEST_CASE_METHOD(coordinator_fixture,
                 "V3: coordinator actor: a killed replica fails reads and "
                 "updates with replica_failed",
                 "[coordinator][failure]") {
  auto w = create("w", tensor::scalar<float>(1.f), synchronization::on_write,
                  aggregation::sum);
  auto m = create("m", tensor::scalar<float>(1.f), synchronization::on_read,
                  aggregation::sum);
  kill_replica(1);
  // Every request below is answered (no hang) and fails with replica_failed.
  auto up = ask<ok_atom>(coord, update_atom::value, w.id, update_op::assign,
                         tensor::scalar<float>(2.f));
  REQUIRE_FALSE(up);
  INFO(describe_result(up.error()));
  CHECK(has_code(up.error(), errc::replica_failed));
  auto rd = ask<tensor>(coord, read_atom::value, m.id);
  REQUIRE_FALSE(rd);
  INFO(describe_result(rd.error()));
  CHECK(has_code(rd.error(), errc::replica_failed));
  auto vs = ask<std::vector<tensor>>(coord, values_atom::value, w.id);
  REQUIRE_FALSE(vs);
  CHECK(has_code(vs.error(), errc::replica_failed));
  // The primary is alive, but the strategy has a failed replica: an on_write
  // read fails too once the coordinator has seen the replica go down.
  auto rw = ask<tensor>(coord, read_atom::value, w.id);
  REQUIRE_FALSE(rw);
  CHECK(has_code(rw.error(), errc::replica_failed));
  // The coordinator itself still answers.
  CHECK(ask<strategy_description>(coord, describe_atom::value));
}

TEST_CASE_METHOD(coordinator_fixture,
                 "V3: coordinator actor: a killed primary replica fails reads "
                 "with replica_failed",
                 "[coordinator][failure]") {
  auto w = create("w", tensor::scalar<float>(1.f));
  kill_replica(0);
  auto rd = ask<tensor>(coord, read_atom::value, w.id);
  REQUIRE_FALSE(rd);
  INFO(describe_result(rd.error()));
  CHECK(has_code(rd.error(), errc::replica_failed));
  auto up = ask<ok_atom>(coord, update_atom::value, w.id,
                         update_op::assign_add, tensor::scalar<float>(1.f));
  REQUIRE_FALSE(up);
  CHECK(has_code(up.error(), errc::replica_failed));
  variable_spec spec;
  spec.name = "late";
  spec.initial_value = tensor::scalar<float>(1.f);
  auto cr = try_create(spec);
  REQUIRE_FALSE(cr);
  CHECK(has_code(cr.error(), errc::replica_failed));
}

TEST_CASE_METHOD(short_deadline_fixture,
                 "V3: coordinator actor: a step stuck on one replica past the "
                 "deadline fails with timeout and changes nothing",
                 "[coordinator][failure]") {
  auto w = create("w", tensor::scalar<float>(1.f), synchronization::on_write,
                  aggregation::sum);
  auto step = std::make_shared<sleepy_step>(variable{w}, 2,
                                            std::chrono::milliseconds(1500));
  auto res = ask<ok_atom>(coord, run_atom::value, replica_step_ptr{step});
  REQUIRE_FALSE(res);
  INFO(describe_result(res.error()));
  CHECK(has_code(res.error(), errc::timeout));
  // Once the stuck replica is free again (its mailbox is FIFO, so a local
  // read answers after the step), the strategy works and nothing changed.
  auto rs = replicas();
  REQUIRE(ask<tensor>(rs[2], local_read_atom::value, w.id));
  CHECK(component_values<float>(w.id) == repeat<float>({1.f}));
  REQUIRE_FALSE(update(w.id, update_op::assign_add, tensor::scalar<float>(1.f)));
  CHECK(component_values<float>(w.id) == repeat<float>({2.f}));
}

TEST_CASE_METHOD(coordinator_fixture,
                 "W8: coordinator actor: concurrent updates from two actors "
                 "apply in one order on every replica",
                 "[coordinator]") {
  auto v = create("w", tensor::from_list<int32_t>({0, 0}),
                  synchronization::on_write, aggregation::sum);
  auto client = caf::actor_cast<caf::actor>(self);
  auto c = coord;
  auto id = v.id;
  static constexpr int rounds = 50;
  auto writer = [c, id, client](caf::event_based_actor* ev,
                                int32_t tag) -> caf::behavior {
    auto pending = std::make_shared<int>(rounds);
    for (int k = 0; k < rounds; ++k) {
      auto op = k % 2 == 0 ? update_op::assign : update_op::assign_add;
      ev->request(c, std::chrono::seconds(10), update_atom::value, id, op,
                  tensor::from_list<int32_t>({tag * 1000 + k, tag}))
        .then(
          [ev, client, pending](ok_atom) {
            if (--*pending == 0) {
              ev->send(client, ok_atom::value);
              ev->quit();
            }
          },
          [ev, client](caf::error& err) {
            ev->send(client, err);
            ev->quit();
          });
    }
    return {[](int32_t) {}};
  };
  stop_at_end(sys.spawn(writer, 1));
  stop_at_end(sys.spawn(writer, 2));
  int done = 0;
  caf::error err;
  bool timed_out = false;
  for (int i = 0; i < 2 && !timed_out && !err; ++i)
    self->receive([&](ok_atom) { ++done; }, [&](caf::error& e) { err = e; },
                  caf::after(test::reply_deadline) >> [&] { timed_out = true; });
  REQUIRE_FALSE(timed_out);
  INFO(describe_result(err));
  REQUIRE(done == 2);
  auto comps = values(id);
  REQUIRE(comps.size() == static_cast<size_t>(num_devices));
  for (auto& t : comps)
    CHECK(t.bitwise_equal(comps[0])); // W7
}

// -- callers that are actors --------------------------------------------------------

TEST_CASE_METHOD(coordinator_fixture,
                 "coordinator actor: an event-based actor can update then read "
                 "through the coordinator",
                 "[coordinator]") {
  auto v = create("counter", tensor::scalar<int64_t>(40));
  auto client = caf::actor_cast<caf::actor>(self);
  auto c = coord;
  auto id = v.id;
  // `client` is a spawn argument, not a capture: CAF 0.17 binds a reference
  // through a null pointer when a function actor gets no arguments (UBSan).
  auto worker = sys.spawn([c, id](caf::event_based_actor* ev,
                                  caf::actor client) -> caf::behavior {
    auto fail = [ev, client](caf::error& err) {
      ev->send(client, err);
      ev->quit();
    };
    ev->request(c, std::chrono::seconds(10), update_atom::value, id,
                update_op::assign_add, tensor::scalar<int64_t>(2))
      .then(
        [ev, c, id, client, fail](ok_atom) {
          ev->request(c, std::chrono::seconds(10), read_atom::value, id)
            .then(
              [ev, client](tensor& t) {
                ev->send(client, std::move(t));
                ev->quit();
              },
              fail);
        },
        fail);
    return {[](ok_atom) {}};
  }, client);
  stop_at_end(worker);
  std::vector<int64_t> got;
  caf::error err;
  bool timed_out = false;
  self->receive([&](tensor& t) { got = t.to_vector<int64_t>(); },
                [&](caf::error& e) { err = e; },
                caf::after(test::reply_deadline) >> [&] { timed_out = true; });
  REQUIRE_FALSE(timed_out);
  INFO(describe_result(err));
  CHECK_FALSE(err);
  CHECK(got == std::vector<int64_t>{42});
}

// -- embedding a strategy into the user's actor system ------------------------------

TEST_CASE_METHOD(actor_fixture,
                 "strategy embedded in the user's actor system: the blocking "
                 "API and coordinator_of see the same variable",
                 "[coordinator][strategy]") {
  strategy_options opts;
  opts.devices = {"cpu:0", "cpu:1"};
  opts.timeout = std::chrono::milliseconds(10000);
  auto s = strategy::create(sys, opts);
  REQUIRE(s);
  auto coordinator = coordinator_of(*s);
  REQUIRE(coordinator);
  stop_at_end(coordinator);

  auto v = s->create_variable("shared", tensor::scalar<float>(1.f));
  REQUIRE(v);
  auto found = ask<variable_info>(coordinator, lookup_atom::value,
                                  std::string{"shared"});
  REQUIRE(found);
  CHECK(found->id == v->id());
  // An update through the actor interface is seen by the blocking API ...
  REQUIRE(ask<ok_atom>(coordinator, update_atom::value, v->id(),
                       update_op::assign, tensor::scalar<float>(7.f)));
  auto x = s->read(*v);
  REQUIRE(x);
  CHECK(x->to_vector<float>() == std::vector<float>{7.f});
  // ... and the other way round.
  REQUIRE_FALSE(s->assign_add(*v, 2.0));
  auto y = ask<tensor>(coordinator, read_atom::value, v->id());
  REQUIRE(y);
  CHECK(y->to_vector<float>() == std::vector<float>{9.f});
  // The replicas of the strategy hold the components.
  auto r1 = replica_of(*s, 1);
  REQUIRE(r1);
  auto local = ask<tensor>(r1, local_read_atom::value, v->id());
  REQUIRE(local);
  CHECK(local->to_vector<float>() == std::vector<float>{9.f});
  s->shutdown();
  auto after = s->read(*v);
  REQUIRE_FALSE(after);
  CHECK(has_code(after.error(), errc::shut_down));
}

// -- the narrow replica handle (issue: direct component messages) ----------------

static_assert(std::is_same_v<decltype(replica_of(std::declval<const strategy&>(), 0)),
                             replica_local_actor>,
              "replica_of exposes only the local interface");

TEST_CASE_METHOD(actor_fixture,
                 "W7: a replica refuses component messages that do not come "
                 "from its coordinator, so a bound actor cannot break W7 or "
                 "the registry",
                 "[coordinator][replica][W7]") {
  strategy_options opts;
  opts.devices = {"cpu:0", "cpu:1"};
  opts.timeout = std::chrono::milliseconds(10000);
  auto s = strategy::create(sys, opts);
  REQUIRE(s);
  stop_at_end(coordinator_of(*s));
  auto v = s->create_variable("w", tensor::from_vector<float>({2}, {1.f, 1.f}),
                              synchronization::on_write, aggregation::sum);
  REQUIRE(v);
  // What an actor can do with the handle replica_of gives it, cast to an
  // untyped handle: component update and destroy are refused.
  auto raw = caf::actor_cast<caf::actor>(replica_of(*s, 1));
  REQUIRE(raw);
  auto updated = ask<ok_atom>(raw, component_update_atom::value, v->id(),
                              update_op::assign,
                              tensor::from_vector<float>({2}, {1.f, 666.f}));
  REQUIRE_FALSE(updated);
  CHECK(has_code(updated.error(), errc::invalid_argument));
  CHECK_THAT(describe_result(updated.error()),
             Catch::Contains("only from the strategy's coordinator"));
  auto destroyed = ask<ok_atom>(raw, component_destroy_atom::value, v->id());
  REQUIRE_FALSE(destroyed);
  CHECK(has_code(destroyed.error(), errc::invalid_argument));
  // Every component unchanged (W7) and the registry still true.
  auto values = s->local_values(*v);
  REQUIRE(values);
  for (auto& c : *values)
    CHECK(c.to_vector<float>() == std::vector<float>{1.f, 1.f});
  auto added = s->assign_add(*v, tensor::from_vector<float>({2}, {1.f, 1.f}));
  INFO(describe_result(added));
  REQUIRE_FALSE(added);
  auto after = s->local_values(*v);
  REQUIRE(after);
  for (auto& c : *after)
    CHECK(c.to_vector<float>() == std::vector<float>{2.f, 2.f});
  // Local reads through the narrow handle still work.
  auto local = ask<tensor>(replica_of(*s, 1), local_read_atom::value, v->id());
  REQUIRE(local);
  CHECK(local->to_vector<float>() == std::vector<float>{2.f, 2.f});
  s->shutdown();
}

// -- commit point and read ordering through the actor API --------------------------

TEST_CASE_METHOD(actor_fixture,
                 "V2: coordinator actor: an update whose confirmation misses "
                 "the deadline is answered committed_late and applied once",
                 "[coordinator][V2]") {
  strategy_options opts;
  opts.devices = {"cpu:0", "cpu:1"};
  opts.timeout = std::chrono::milliseconds(100);
  auto s = varsync::testing::create_with_faults(
    sys, opts, {delay_replica(1, std::chrono::milliseconds(400), 2)});
  REQUIRE(s);
  auto coordinator = coordinator_of(*s);
  stop_at_end(coordinator);
  auto v = s->with_timeout(std::chrono::milliseconds(5000))
             .create_variable("w", tensor::scalar<float>(0.f));
  REQUIRE(v);
  auto r = ask<ok_atom>(coordinator, update_atom::value, v->id(),
                        update_op::assign_add, tensor::scalar<float>(1.f));
  REQUIRE_FALSE(r);
  INFO(describe_result(r));
  CHECK(has_code(r.error(), errc::committed_late));
  auto values = s->with_timeout(std::chrono::milliseconds(5000)).local_values(*v);
  REQUIRE(values);
  for (auto& c : *values)
    CHECK(c.to_vector<float>() == std::vector<float>{1.f});
  s->shutdown();
}

TEST_CASE_METHOD(actor_fixture,
                 "W8: coordinator actor: a read sent after an update is "
                 "answered after the update is confirmed by every replica",
                 "[coordinator][W8]") {
  strategy_options opts;
  opts.devices = {"cpu:0", "cpu:1"};
  opts.timeout = std::chrono::milliseconds(5000);
  auto s = varsync::testing::create_with_faults(
    sys, opts, {delay_replica(1, std::chrono::milliseconds(200), 2)});
  REQUIRE(s);
  auto coordinator = coordinator_of(*s);
  stop_at_end(coordinator);
  auto v = s->create_variable("w", tensor::scalar<float>(0.f));
  REQUIRE(v);
  // One client sends the update and the read back to back and records the
  // order of the answers.
  auto client = sys.spawn([coordinator, id = v->id()](
                            caf::event_based_actor* self,
                            caf::actor reporter) {
    auto order = std::make_shared<std::vector<std::string>>();
    auto report = [self, order, reporter] {
      if (order->size() == 2)
        self->send(reporter, *order);
    };
    self->request(coordinator, caf::infinite, update_atom::value, id,
                  update_op::assign, tensor::scalar<float>(5.f))
      .then([order, report](ok_atom) { order->push_back("update"); report(); },
            [order, report](caf::error&) { order->push_back("update error"); report(); });
    self->request(coordinator, caf::infinite, read_atom::value, id)
      .then([order, report](tensor& t) {
              order->push_back("read " + std::to_string(t.as_double()));
              report();
            },
            [order, report](caf::error&) { order->push_back("read error"); report(); });
  }, caf::actor{self});
  stop_at_end(client);
  std::vector<std::string> order;
  self->receive([&](std::vector<std::string>& got) { order = got; },
                caf::after(test::reply_deadline) >> [] {});
  CHECK(order == std::vector<std::string>{"update", "read 5.000000"});
  s->shutdown();
}

// -- V4: enums are validated where they enter -------------------------------------

TEST_CASE_METHOD(coordinator_fixture,
                 "V4: coordinator actor: an out-of-range update_op or "
                 "reduce_op is invalid_argument and no replica fails",
                 "[coordinator][validation]") {
  auto w = create("w", tensor::from_list<float>({1.f, 2.f}),
                  synchronization::on_write, aggregation::sum);
  auto r = create("r", tensor::scalar<int64_t>(4), synchronization::on_read,
                  aggregation::sum);
  for (auto* info : {&w, &r}) {
    for (int op : {3, 99, 255}) {
      INFO(info->name << " op " << op);
      auto x = tensor::zeros(info->type, info->shape);
      auto err = update(info->id, static_cast<update_op>(op), x);
      CHECK(has_code(err, errc::invalid_argument));
      CHECK(message_of(err).find(info->name) != std::string::npos);
      CHECK(message_of(err).find(std::to_string(op)) != std::string::npos);
    }
  }
  auto bad = ask<std::vector<tensor>>(
    coord, allreduce_atom::value, static_cast<reduce_op>(42),
    std::vector<std::vector<tensor>>{
      std::vector<tensor>(num_devices, tensor::scalar<float>(1.f))});
  REQUIRE_FALSE(bad);
  CHECK(has_code(bad.error(), errc::invalid_argument));
  CHECK(message_of(bad.error()).find("42") != std::string::npos);
  // Nothing changed and every replica still serves.
  CHECK(component_values<float>(w.id) == repeat<float>({1.f, 2.f}));
  auto rv = component_values<int64_t>(r.id);
  CHECK(rv[0] == std::vector<int64_t>{4});
  REQUIRE_FALSE(update(w.id, update_op::assign_add,
                       tensor::from_list<float>({1.f, 1.f})));
  CHECK(component_values<float>(w.id) == repeat<float>({2.f, 3.f}));
}

TEST_CASE_METHOD(actor_fixture,
                 "V4: spawn_coordinator refuses an unknown device kind or "
                 "step exception policy before spawning a replica",
                 "[coordinator][validation]") {
  coordinator_config cc;
  cc.devices = {device_id{device_kind::host, 0},
                device_id{static_cast<device_kind>(7), 1}};
  auto c = spawn_coordinator(sys, cc);
  REQUIRE_FALSE(c);
  CHECK(has_code(c.error(), errc::invalid_argument));
  CHECK(message_of(c.error()).find("7") != std::string::npos);
  coordinator_config neg;
  neg.devices = {device_id{device_kind::host, -1}};
  auto n = spawn_coordinator(sys, neg);
  REQUIRE_FALSE(n);
  CHECK(has_code(n.error(), errc::invalid_argument));
  coordinator_config policy;
  policy.devices = {device_id{device_kind::host, 0}};
  policy.step_exception = static_cast<on_step_exception>(5);
  auto p = spawn_coordinator(sys, policy);
  REQUIRE_FALSE(p);
  CHECK(has_code(p.error(), errc::invalid_argument));
  CHECK(message_of(p.error()).find("5") != std::string::npos);
}

namespace {

template <class T>
std::vector<char> to_bytes(caf::actor_system& sys, T x) {
  std::vector<char> buf;
  caf::binary_serializer sink{sys, buf};
  REQUIRE_FALSE(sink(x));
  return buf;
}

template <class T>
caf::error from_bytes(caf::actor_system& sys, const std::vector<char>& buf,
                      T& x) {
  caf::binary_deserializer source{sys, buf.data(), buf.size()};
  return source(x);
}

} // namespace

TEST_CASE_METHOD(actor_fixture,
                 "V4: deserializing a message with an out-of-range enum "
                 "fails (variable_spec, variable_info, recorded_update)",
                 "[messages][validation]") {
  variable_spec spec;
  spec.name = "v";
  spec.initial_value = tensor::scalar<float>(1.f);
  spec.sync = synchronization::on_read;
  spec.agg = aggregation::sum;
  variable_spec spec_back;
  REQUIRE_FALSE(from_bytes(sys, to_bytes(sys, spec), spec_back));
  CHECK(spec_back.sync == synchronization::on_read);
  for (int bad : {4, 200}) {
    INFO("value " << bad);
    auto s1 = spec;
    s1.sync = static_cast<synchronization>(bad);
    variable_spec out;
    CHECK(from_bytes(sys, to_bytes(sys, s1), out));
    auto s2 = spec;
    s2.agg = static_cast<aggregation>(bad);
    CHECK(from_bytes(sys, to_bytes(sys, s2), out));
  }
  variable_info info;
  info.id = 3;
  info.name = "v";
  variable_info info_back;
  REQUIRE_FALSE(from_bytes(sys, to_bytes(sys, info), info_back));
  CHECK(info_back.id == 3);
  {
    auto i1 = info;
    i1.type = static_cast<dtype>(6);
    CHECK(from_bytes(sys, to_bytes(sys, i1), info_back));
    auto i2 = info;
    i2.sync = static_cast<synchronization>(9);
    CHECK(from_bytes(sys, to_bytes(sys, i2), info_back));
    auto i3 = info;
    i3.agg = static_cast<aggregation>(4);
    CHECK(from_bytes(sys, to_bytes(sys, i3), info_back));
  }
  step_report report;
  report.updates.push_back({1, update_op::assign_sub,
                            tensor::scalar<float>(2.f)});
  step_report report_back;
  REQUIRE_FALSE(from_bytes(sys, to_bytes(sys, report), report_back));
  REQUIRE(report_back.updates.size() == 1);
  CHECK(report_back.updates[0].op == update_op::assign_sub);
  report.updates[0].op = static_cast<update_op>(3);
  CHECK(from_bytes(sys, to_bytes(sys, report), report_back));
}

TEST_CASE_METHOD(coordinator_fixture,
                 "C9: coordinator actor: create refuses reserved and "
                 "unsaveable names and creates nothing",
                 "[coordinator][validation]") {
  create("a", tensor::scalar<float>(1.f), synchronization::none);
  for (std::string name : {std::string{"__metadata__"},
                           std::string{"a/replica_0"},
                           std::string{"ok\0no", 5}, std::string(300, 'z')}) {
    INFO("name of " << name.size() << " bytes");
    variable_spec spec;
    spec.name = name;
    spec.initial_value = tensor::scalar<float>(0.f);
    auto res = try_create(spec);
    REQUIRE_FALSE(res);
    CHECK(has_code(res.error(), errc::invalid_argument));
  }
  auto all = ask<std::vector<variable_info>>(coord, list_atom::value);
  REQUIRE(all);
  REQUIRE(all->size() == 1);
  CHECK(all->front().name == "a");
}

TEST_CASE_METHOD(coordinator_fixture,
                 "V4: coordinator actor: an integer update that overflows one "
                 "replica's component fails with overflow and changes none",
                 "[coordinator][validation]") {
  auto v = create("counts", tensor::scalar<int32_t>(0), synchronization::none);
  // Components 0, 1, 2, 3 (set through the replicas directly).
  auto rs = replicas();
  for (size_t r = 0; r < rs.size(); ++r)
    REQUIRE(ask<ok_atom>(rs[r], local_update_atom::value, v.id,
                         update_op::assign,
                         tensor::scalar<int32_t>(static_cast<int32_t>(r))));
  const int32_t max32 = std::numeric_limits<int32_t>::max();
  auto err = update(v.id, update_op::assign_add,
                    tensor::scalar<int32_t>(max32 - 2));
  CHECK(has_code(err, errc::overflow));
  CHECK(message_of(err).find("'counts'") != std::string::npos);
  CHECK(component_values<int32_t>(v.id)
        == std::vector<std::vector<int32_t>>{{0}, {1}, {2}, {3}});
  REQUIRE_FALSE(update(v.id, update_op::assign_add,
                       tensor::scalar<int32_t>(max32 - 3)));
  CHECK(component_values<int32_t>(v.id)
        == std::vector<std::vector<int32_t>>{
          {max32 - 3}, {max32 - 2}, {max32 - 1}, {max32}});
}

TEST_CASE_METHOD(actor_fixture,
                 "checkpoint actor: it stops when the coordinator of its "
                 "strategy stops, so the actor system can shut down",
                 "[coordinator][strategy][checkpoint]") {
  strategy_options opts;
  opts.devices = {"cpu:0", "cpu:1"};
  opts.timeout = std::chrono::milliseconds(10000);
  auto s = strategy::create(sys, opts);
  REQUIRE(s);
  auto ckpt = spawn_checkpoint_actor(*s);
  stop_at_end(ckpt);
  self->monitor(ckpt);
  s->shutdown(); // the coordinator exits; the checkpoint actor follows
  bool down = false;
  self->receive([&](caf::down_msg& msg) { down = msg.source == ckpt.address(); },
                caf::after(varsync::test::reply_deadline) >> [] {});
  CHECK(down);
}

// -- threads that must not block -----------------------------------------------------

namespace {

struct marker_step final : replica_step {
  explicit marker_step(int n) : seen(static_cast<size_t>(n), 0) {}
  void run(replica_context& ctx) override {
    seen[static_cast<size_t>(ctx.replica_id())]
      = detail::on_varsync_actor_thread() ? 1 : 0;
  }
  std::vector<int> seen; // not vector<bool>: replicas write concurrently
};

// A client call whose completion notes the thread it runs on.
client_call_ptr marker_call(std::shared_ptr<std::promise<bool>> seen) {
  reply_fn<strategy_description> done
    = [seen](caf::expected<strategy_description>) {
        seen->set_value(detail::on_varsync_actor_thread());
      };
  return std::make_shared<client_call>(ops::describe{}, caf::timespan::max(),
                                       make_completion(std::move(done)));
}

} // namespace

TEST_CASE_METHOD(coordinator_fixture,
                 "coordinator and replica actors mark their thread while they "
                 "run user code, so blocking calls from there can fail fast",
                 "[coordinator][step]") {
  CHECK_FALSE(detail::on_varsync_actor_thread());
  auto step = std::make_shared<marker_step>(num_devices);
  auto res = ask<ok_atom>(coord, run_atom::value, replica_step_ptr{step});
  REQUIRE(res);
  CHECK(step->seen == std::vector<int>(num_devices, 1));
  auto p = std::make_shared<std::promise<bool>>();
  auto seen = p->get_future();
  self->send(coord, client_atom::value, marker_call(p));
  REQUIRE(seen.wait_for(varsync::test::reply_deadline)
          == std::future_status::ready);
  CHECK(seen.get());
  CHECK_FALSE(detail::on_varsync_actor_thread());
}

// -- overload (V3) --------------------------------------------------------------------

TEST_CASE_METHOD(actor_fixture,
                 "V3: actor requests beyond max_queued_operations waiting for "
                 "the coordinator are refused at once with overloaded, the "
                 "accepted ones are applied exactly",
                 "[coordinator][overload]") {
  strategy_options opts;
  opts.devices = {"cpu:0", "cpu:1"};
  opts.timeout = std::chrono::milliseconds(20000);
  opts.max_queued_operations = 16;
  auto s = varsync::testing::create_with_faults(
    sys, opts, {delay_replica(1, std::chrono::milliseconds(5))});
  REQUIRE(s);
  auto coordinator = coordinator_of(*s);
  REQUIRE(coordinator);
  stop_at_end(coordinator);
  // float64: an integer cross-replica add runs as a collective (V4), which
  // the replica delay does not slow down; this one waits for replica 1.
  auto v = s->create_variable("counter", tensor::scalar<double>(0),
                              synchronization::on_write, aggregation::sum);
  REQUIRE(v);
  constexpr int n = 1000;
  auto send_one = [&] {
    return self->request(coordinator, test::reply_deadline, update_atom::value,
                         v->id(), update_op::assign_add,
                         tensor::scalar<double>(1));
  };
  std::vector<decltype(send_one())> handles;
  for (int i = 0; i < n; ++i)
    handles.push_back(send_one());
  // One more while the queue is full: refused at once, not after the
  // accepted updates (80 x 5 ms at least) or the deadline.
  auto t0 = std::chrono::steady_clock::now();
  auto probe = ask<ok_atom>(coordinator, update_atom::value, v->id(),
                            update_op::assign_add, tensor::scalar<double>(1));
  auto probe_took = std::chrono::steady_clock::now() - t0;
  int ok = probe ? 1 : 0;
  if (!probe) {
    CHECK(has_code(probe.error(), errc::overloaded));
    CHECK(probe_took < std::chrono::milliseconds(300));
  }
  int refused = 0;
  int other = 0;
  for (auto& h : handles)
    h.receive([&](ok_atom) { ++ok; },
              [&](caf::error& err) {
                if (has_code(err, errc::overloaded))
                  ++refused;
                else
                  ++other;
              });
  CHECK(other == 0);
  // 64 in flight plus 16 waiting, a few more if some finished meanwhile.
  CHECK(ok >= 80);
  CHECK(refused >= n / 2);
  CHECK(ok + refused == n + (probe ? 1 : 0));
  // Recovery, and exactly the accepted updates applied.
  REQUIRE(ask<ok_atom>(coordinator, update_atom::value, v->id(),
                       update_op::assign_add, tensor::scalar<double>(1)));
  auto x = ask<tensor>(coordinator, read_atom::value, v->id());
  REQUIRE(x);
  CHECK(x->to_vector<double>() == std::vector<double>{ok + 1.0});
  s->shutdown();
}

TEST_CASE_METHOD(actor_fixture,
                 "local_add through replica_of: applied to the bound replica's "
                 "component, and the ones not applied are reported in "
                 "strategy_description::local_adds_dropped",
                 "[coordinator][local_add]") {
  strategy_options opts;
  opts.devices = {"cpu:0", "cpu:1"};
  opts.timeout = std::chrono::milliseconds(20000);
  auto s = strategy::create(sys, opts);
  REQUIRE(s);
  auto coordinator = coordinator_of(*s);
  REQUIRE(coordinator);
  stop_at_end(coordinator);
  auto hits = s->create_variable("hits", tensor::scalar<int64_t>(0),
                                 synchronization::on_read, aggregation::sum);
  auto w = s->create_variable("w", tensor::scalar<float>(0.f),
                              synchronization::on_write, aggregation::sum);
  REQUIRE(hits);
  REQUIRE(w);
  auto r0 = replica_of(*s, 0);
  auto r1 = replica_of(*s, 1);
  for (int i = 0; i < 500; ++i) {
    self->send(r0, local_add_atom::value, hits->id(), 1.0);
    self->send(r1, local_add_atom::value, hits->id(), 2.0);
  }
  self->send(r1, local_add_atom::value, w->id(), 1.0); // on_write: dropped
  REQUIRE(ask<tensor>(r0, local_read_atom::value, hits->id()));
  REQUIRE(ask<tensor>(r1, local_read_atom::value, hits->id()));
  auto total = s->read(*hits); // ON_READ sum over the replicas
  REQUIRE(total);
  CHECK(total->to_vector<int64_t>() == std::vector<int64_t>{1500});
  auto stats = ask<strategy_description>(coordinator, describe_atom::value);
  REQUIRE(stats);
  CHECK(stats->local_adds_dropped == 1);
  auto wv = s->read(*w);
  REQUIRE(wv);
  CHECK(wv->to_vector<float>() == std::vector<float>{0.f});
  s->shutdown();
}

TEST_CASE_METHOD(coordinator_fixture,
                 "S4: coordinator actor: scatter_atom applies rows to every "
                 "component, and refuses a bad index with nothing changed",
                 "[coordinator][scatter]") {
  auto w = create("w", tensor::from_vector<int32_t>({3, 2}, {0, 0, 0, 0, 0, 0}),
                  synchronization::on_write, aggregation::sum);
  indexed_slices rows{{2}, tensor::from_vector<int32_t>({1, 2}, {5, 6})};
  auto ok = ask<ok_atom>(coord, scatter_atom::value, w.id, scatter_op::add,
                         rows);
  INFO(describe_result(ok));
  REQUIRE(ok);
  for (auto& c : component_values<int32_t>(w.id))
    CHECK(c == std::vector<int32_t>{0, 0, 0, 0, 5, 6});
  indexed_slices bad{{3}, tensor::from_vector<int32_t>({1, 2}, {1, 1})};
  auto refused = ask<ok_atom>(coord, scatter_atom::value, w.id,
                              scatter_op::add, bad);
  REQUIRE_FALSE(refused);
  CHECK(has_code(refused.error(), errc::invalid_argument));
  for (auto& c : component_values<int32_t>(w.id))
    CHECK(c == std::vector<int32_t>{0, 0, 0, 0, 5, 6});
}
