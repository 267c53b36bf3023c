// Actor-level tests of the replica actor (actors/replica/replica_actor.hpp), driven
// through its typed message interface as the coordinator drives it: component
// requests, local requests, replica steps and the three phases of a host
// collective. Host devices only; no GPU.

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <thread>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <caf/actor_cast.hpp>
#include <caf/after.hpp>
#include <caf/system_messages.hpp>
#include <caf/event_based_actor.hpp>

#include "actor_fixture.hpp"
#include "actors/replica/replica_actor.hpp"
#include "varsync/error.hpp"
#include "varsync/tensor.hpp"
#include "messages/atoms.hpp"
#include "messages/replica_interface.hpp"
#include "varsync/internal/step_report.hpp"
#include "varsync/step_task.hpp"
#include "varsync/variable.hpp"
#include "sync/collectives/one_pass_shared_memory.hpp"
#include "sync/collectives/collective_algorithm.hpp"
#include "varsync/replica_context.hpp"
#include "varsync/function_step.hpp"

using namespace varsync;
using varsync::test::actor_fixture;
using varsync::test::describe_result;

namespace {

// The coordinator shares one description per variable with its replicas.
shared_variable_info shared(variable_info info) {
  return std::make_shared<const variable_info>(std::move(info));
}

struct replica_fixture : actor_fixture {
  replica_actor spawn(int rank, int num_replicas,
                      on_step_exception step_exception
                      = on_step_exception::stop_replica) {
    auto r = spawn_replica(sys, {rank, num_replicas,
                                 device_id{device_kind::host, 0}, {},
                                 step_exception});
    REQUIRE(r);
    stop_at_end(*r);
    // The test plays the coordinator.
    self->send(*r, bind_atom::value);
    return *r;
  }

  static variable_info
  info_of(uint64_t id, const std::string& name, const tensor& x,
          synchronization sync = synchronization::on_write,
          aggregation agg = aggregation::none) {
    variable_info info;
    info.id = id;
    info.name = name;
    info.type = x.type();
    info.shape = x.shape();
    info.sync = sync;
    info.agg = agg;
    info.trainable = sync != synchronization::on_read;
    return info;
  }

  void create(const replica_actor& r, const variable_info& info,
              const tensor& initial) {
    auto res = ask<ok_atom>(r, component_create_atom::value, shared(info), initial);
    REQUIRE(res);
  }

  tensor read(const replica_actor& r, uint64_t id) {
    auto res = ask<tensor>(r, component_read_atom::value, id);
    INFO(describe_result(res));
    REQUIRE(res);
    return *res;
  }

  caf::error update(const replica_actor& r, uint64_t id, update_op op,
                    const tensor& x) {
    auto res = ask<ok_atom>(r, component_update_atom::value, id, op, x);
    return res ? caf::error{} : res.error();
  }
};

/// A tiny replica step: assign_add `delta` to every variable in `vars`, and
/// copy the local component of `vars[watch]` right after the update.
struct add_step final : replica_step {
  add_step(std::vector<variable> vs, double d, size_t w)
    : vars(std::move(vs)), delta(d), watch(w) {
  }

  void run(replica_context& ctx) override {
    for (auto& v : vars) {
      auto x = tensor::filled(v.type(), v.shape(), delta);
      if (auto err = ctx.assign_add(v, x)) {
        errors.push_back(err);
        return;
      }
    }
    if (auto copy = ctx.read_copy(vars[watch]))
      seen_after_update = *copy;
    else
      errors.push_back(copy.error());
  }

  std::vector<variable> vars;
  double delta;
  size_t watch;
  std::vector<caf::error> errors;
  std::optional<tensor> seen_after_update;
};

struct throwing_step final : replica_step {
  void run(replica_context&) override {
    throw std::runtime_error("boom");
  }
};

std::vector<float> iota_floats(size_t n, float start, float step) {
  std::vector<float> out(n);
  for (size_t i = 0; i < n; ++i)
    out[i] = start + step * static_cast<float>(i);
  return out;
}

/// A run of `plan` by the one-pass algorithm, as the coordinator makes it.
collective_run_ptr run_of(std::shared_ptr<collective_plan> plan) {
  auto run = std::make_shared<collective_run>();
  run->buffers = bind_plan_buffers(*plan);
  run->algorithm = make_one_pass_shared_memory(plan->num_replicas);
  run->plan = std::move(plan);
  return run;
}

/// A run that all-reduces (sum) one contribution per replica into the
/// components of `id` with `uop`.
collective_run_ptr
sum_into_components(uint64_t id, std::vector<tensor> contributions,
                    update_op uop) {
  auto plan = std::make_shared<collective_plan>();
  plan->num_replicas = static_cast<int>(contributions.size());
  auto& item = plan->add_item();
  item.variable_id = id;
  item.type = contributions[0].type();
  item.count = contributions[0].size();
  item.rop = reduce_op::sum;
  item.uop = uop;
  item.source = collective_source::contributions;
  item.target = collective_target::components;
  item.contributions = std::move(contributions);
  return run_of(plan);
}

} // namespace

// -- components ------------------------------------------------------------------

TEST_CASE_METHOD(replica_fixture,
                 "C6: replica actor: component_read returns the initial value "
                 "bitwise",
                 "[replica]") {
  auto r = spawn(0, 1);
  auto x = tensor::from_vector<float>({2, 3}, {1.5f, -2.f, 3.25f, 0.f, 7.f, 8.f});
  create(r, info_of(1, "w", x), x);
  auto got = read(r, 1);
  CHECK(got.bitwise_equal(x));
  CHECK(got.shape() == tensor_shape{2, 3});
  // A local read sees the same component.
  auto local = ask<tensor>(r, local_read_atom::value, uint64_t{1});
  REQUIRE(local);
  CHECK(local->bitwise_equal(x));
}

TEST_CASE_METHOD(replica_fixture,
                 "replica actor: component_update applies assign, assign_add "
                 "and assign_sub",
                 "[replica]") {
  auto r = spawn(0, 1);
  auto x = tensor::from_list<int64_t>({10, 20, 30});
  create(r, info_of(7, "counts", x), x);
  REQUIRE_FALSE(update(r, 7, update_op::assign_add,
                       tensor::from_list<int64_t>({1, 2, 3})));
  CHECK(read(r, 7).to_vector<int64_t>() == std::vector<int64_t>{11, 22, 33});
  REQUIRE_FALSE(update(r, 7, update_op::assign_sub,
                       tensor::from_list<int64_t>({5, 5, 5})));
  CHECK(read(r, 7).to_vector<int64_t>() == std::vector<int64_t>{6, 17, 28});
  REQUIRE_FALSE(update(r, 7, update_op::assign,
                       tensor::from_list<int64_t>({-1, 0, 1})));
  CHECK(read(r, 7).to_vector<int64_t>() == std::vector<int64_t>{-1, 0, 1});
}

TEST_CASE_METHOD(replica_fixture,
                 "replica actor: requests for a missing variable fail with "
                 "unknown_variable",
                 "[replica]") {
  auto r = spawn(0, 2);
  auto x = tensor::scalar<float>(1.f);
  uint64_t missing = 42;
  auto rd = ask<tensor>(r, component_read_atom::value, missing);
  REQUIRE_FALSE(rd);
  CHECK(has_code(rd.error(), errc::unknown_variable));
  auto up = ask<ok_atom>(r, component_update_atom::value, missing,
                         update_op::assign, x);
  REQUIRE_FALSE(up);
  CHECK(has_code(up.error(), errc::unknown_variable));
  auto sp = ask<ok_atom>(r, component_split_atom::value, missing, x);
  REQUIRE_FALSE(sp);
  CHECK(has_code(sp.error(), errc::unknown_variable));
  auto lr = ask<tensor>(r, local_read_atom::value, missing);
  REQUIRE_FALSE(lr);
  CHECK(has_code(lr.error(), errc::unknown_variable));
  auto lu = ask<ok_atom>(r, local_update_atom::value, missing,
                         update_op::assign_add, x);
  REQUIRE_FALSE(lu);
  CHECK(has_code(lu.error(), errc::unknown_variable));
}

TEST_CASE_METHOD(replica_fixture,
                 "replica actor: component_destroy removes the component and "
                 "is idempotent",
                 "[replica]") {
  auto r = spawn(0, 1);
  auto x = tensor::scalar<int32_t>(3);
  create(r, info_of(5, "gone", x), x);
  REQUIRE(ask<ok_atom>(r, component_destroy_atom::value, uint64_t{5}));
  auto rd = ask<tensor>(r, component_read_atom::value, uint64_t{5});
  REQUIRE_FALSE(rd);
  CHECK(has_code(rd.error(), errc::unknown_variable));
  CHECK(ask<ok_atom>(r, component_destroy_atom::value, uint64_t{5}));
  // The id can be created again afterwards.
  auto y = tensor::scalar<int32_t>(9);
  create(r, info_of(5, "gone", y), y);
  CHECK(read(r, 5).to_vector<int32_t>() == std::vector<int32_t>{9});
}

TEST_CASE_METHOD(replica_fixture,
                 "C7: replica actor: component_create of an id it already "
                 "holds fails with already_exists and keeps the component",
                 "[replica]") {
  auto r = spawn(0, 1);
  auto x = tensor::scalar<float>(1.f);
  create(r, info_of(1, "a", x), x);
  auto y = tensor::scalar<float>(2.f);
  auto res = ask<ok_atom>(r, component_create_atom::value, shared(info_of(1, "a", y)), y);
  REQUIRE_FALSE(res);
  CHECK(has_code(res.error(), errc::already_exists));
  CHECK(read(r, 1).bitwise_equal(x));
}

TEST_CASE_METHOD(replica_fixture,
                 "replica actor: component_create without a variable "
                 "description fails with invalid_argument and creates nothing",
                 "[replica]") {
  auto r = spawn(0, 1);
  auto res = ask<ok_atom>(r, component_create_atom::value,
                          shared_variable_info{}, tensor::scalar<float>(1.f));
  REQUIRE_FALSE(res);
  CHECK(has_code(res.error(), errc::invalid_argument));
  auto rd = ask<tensor>(r, component_read_atom::value, uint64_t{0});
  REQUIRE_FALSE(rd);
  CHECK(has_code(rd.error(), errc::unknown_variable));
}

TEST_CASE_METHOD(replica_fixture,
                 "C7: replica actor: component_create with an initial value of "
                 "the wrong dtype fails with dtype_mismatch",
                 "[replica]") {
  auto r = spawn(0, 1);
  auto info = info_of(1, "a", tensor::scalar<float>(0.f));
  auto res = ask<ok_atom>(r, component_create_atom::value, shared(info),
                          tensor::scalar<double>(1.0));
  REQUIRE_FALSE(res);
  CHECK(has_code(res.error(), errc::dtype_mismatch));
  auto rd = ask<tensor>(r, component_read_atom::value, uint64_t{1});
  REQUIRE_FALSE(rd);
  CHECK(has_code(rd.error(), errc::unknown_variable));
}

TEST_CASE_METHOD(replica_fixture,
                 "C7: replica actor: values of the wrong dtype or shape fail "
                 "with dtype_mismatch / shape_mismatch and leave the component "
                 "unchanged",
                 "[replica]") {
  auto r = spawn(0, 2);
  auto x = tensor::from_list<float>({1.f, 2.f, 3.f});
  create(r, info_of(1, "w", x, synchronization::on_read, aggregation::sum), x);

  auto wrong_type = tensor::from_list<double>({1.0, 2.0, 3.0});
  auto wrong_shape = tensor::from_list<float>({1.f, 2.f});
  auto wrong_rank = tensor::from_vector<float>({3, 1}, {1.f, 2.f, 3.f});

  SECTION("component_update") {
    auto e1 = update(r, 1, update_op::assign_add, wrong_type);
    CHECK(has_code(e1, errc::dtype_mismatch));
    auto e2 = update(r, 1, update_op::assign, wrong_shape);
    CHECK(has_code(e2, errc::shape_mismatch));
    auto e3 = update(r, 1, update_op::assign_sub, wrong_rank);
    CHECK(has_code(e3, errc::shape_mismatch));
  }
  SECTION("component_split") {
    auto e1 = ask<ok_atom>(r, component_split_atom::value, uint64_t{1},
                           wrong_type);
    REQUIRE_FALSE(e1);
    CHECK(has_code(e1.error(), errc::dtype_mismatch));
    auto e2 = ask<ok_atom>(r, component_split_atom::value, uint64_t{1},
                           wrong_shape);
    REQUIRE_FALSE(e2);
    CHECK(has_code(e2.error(), errc::shape_mismatch));
  }
  SECTION("local_update") {
    auto e1 = ask<ok_atom>(r, local_update_atom::value, uint64_t{1},
                           update_op::assign_add, wrong_type);
    REQUIRE_FALSE(e1);
    CHECK(has_code(e1.error(), errc::dtype_mismatch));
    auto e2 = ask<ok_atom>(r, local_update_atom::value, uint64_t{1},
                           update_op::assign, wrong_shape);
    REQUIRE_FALSE(e2);
    CHECK(has_code(e2.error(), errc::shape_mismatch));
  }
  CHECK(read(r, 1).bitwise_equal(x));
}

// -- local requests (replica context outside a step) -----------------------------

TEST_CASE_METHOD(replica_fixture,
                 "replica actor: local_update of an on_write variable outside a "
                 "step fails with invalid_argument and changes nothing",
                 "[replica]") {
  auto r = spawn(0, 2);
  auto x = tensor::scalar<float>(4.f);
  create(r, info_of(1, "mirrored", x, synchronization::on_write,
                    aggregation::sum),
         x);
  auto res = ask<ok_atom>(r, local_update_atom::value, uint64_t{1},
                          update_op::assign_add, tensor::scalar<float>(1.f));
  REQUIRE_FALSE(res);
  CHECK(has_code(res.error(), errc::invalid_argument));
  CHECK(read(r, 1).bitwise_equal(x));
}

TEST_CASE_METHOD(replica_fixture,
                 "R1: replica actor: local_update of on_read and none "
                 "variables changes the local component at once",
                 "[replica]") {
  auto r = spawn(1, 2);
  auto x = tensor::scalar<int32_t>(10);
  create(r, info_of(1, "metric", x, synchronization::on_read, aggregation::sum),
         x);
  create(r, info_of(2, "local", x, synchronization::none, aggregation::none),
         x);
  REQUIRE(ask<ok_atom>(r, local_update_atom::value, uint64_t{1},
                       update_op::assign_add, tensor::scalar<int32_t>(5)));
  REQUIRE(ask<ok_atom>(r, local_update_atom::value, uint64_t{2},
                       update_op::assign_sub, tensor::scalar<int32_t>(3)));
  auto a = ask<tensor>(r, local_read_atom::value, uint64_t{1});
  auto b = ask<tensor>(r, local_read_atom::value, uint64_t{2});
  REQUIRE(a);
  REQUIRE(b);
  CHECK(a->to_vector<int32_t>() == std::vector<int32_t>{15});
  CHECK(b->to_vector<int32_t>() == std::vector<int32_t>{7});
}

TEST_CASE_METHOD(replica_fixture,
                 "S3: replica actor: local_scatter changes rows of on_read and "
                 "none components at once, and on_write and bad rows are refused "
                 "with nothing changed",
                 "[replica]") {
  auto r = spawn(1, 2);
  auto x = tensor::from_vector<int64_t>({3, 2}, {1, 1, 1, 1, 1, 1});
  create(r, info_of(1, "acc", x, synchronization::on_read, aggregation::sum),
         x);
  create(r, info_of(2, "mirrored", x, synchronization::on_write,
                    aggregation::sum),
         x);
  indexed_slices rows{{2, 0, 2},
                      tensor::from_vector<int64_t>({3, 2}, {1, 2, 3, 4, 5, 6})};
  auto ok = ask<ok_atom>(r, local_scatter_atom::value, uint64_t{1},
                         scatter_op::add, rows);
  INFO(describe_result(ok));
  REQUIRE(ok);
  CHECK(read(r, 1).to_vector<int64_t>()
        == std::vector<int64_t>{4, 5, 1, 1, 7, 9}); // row 2: 1 + 1 + 5, ...
  auto on_write = ask<ok_atom>(r, local_scatter_atom::value, uint64_t{2},
                               scatter_op::add, rows);
  REQUIRE_FALSE(on_write);
  CHECK(has_code(on_write.error(), errc::invalid_argument));
  CHECK(read(r, 2).bitwise_equal(x));
  indexed_slices out_of_range{{3}, tensor::from_vector<int64_t>({1, 2}, {1, 1})};
  auto bad = ask<ok_atom>(r, local_scatter_atom::value, uint64_t{1},
                          scatter_op::update, out_of_range);
  REQUIRE_FALSE(bad);
  CHECK(has_code(bad.error(), errc::invalid_argument));
  CHECK(read(r, 1).to_vector<int64_t>()
        == std::vector<int64_t>{4, 5, 1, 1, 7, 9});
}

// -- R4 splits ----------------------------------------------------------------------

TEST_CASE_METHOD(replica_fixture,
                 "R4: replica actor: split assign gives rank 0 the remainder",
                 "[replica]") {
  auto r0 = spawn(0, 2);
  auto r1 = spawn(1, 2);
  auto init = tensor::scalar<int32_t>(0);
  auto info = info_of(1, "count", init, synchronization::on_read,
                      aggregation::sum);
  create(r0, info, init);
  create(r1, info, init);
  auto x = tensor::scalar<int32_t>(7);
  REQUIRE(ask<ok_atom>(r0, component_split_atom::value, uint64_t{1}, x));
  REQUIRE(ask<ok_atom>(r1, component_split_atom::value, uint64_t{1}, x));
  CHECK(read(r0, 1).to_vector<int32_t>() == std::vector<int32_t>{4});
  CHECK(read(r1, 1).to_vector<int32_t>() == std::vector<int32_t>{3});
}

TEST_CASE_METHOD(replica_fixture,
                 "R4: replica actor: integer split over 3 replicas uses floor "
                 "division and adds up exactly, also for negative values",
                 "[replica]") {
  std::vector<replica_actor> rs;
  for (int rank = 0; rank < 3; ++rank)
    rs.push_back(spawn(rank, 3));
  auto init = tensor::from_list<int64_t>({0, 0, 0});
  auto info = info_of(3, "counts", init, synchronization::on_read,
                      aggregation::sum);
  for (auto& r : rs)
    create(r, info, init);
  auto x = tensor::from_list<int64_t>({10, -7, 2});
  for (auto& r : rs)
    REQUIRE(ask<ok_atom>(r, component_split_atom::value, uint64_t{3}, x));
  // 10 = 4 + 3 + 3; -7 = -2 + -2 + -3 (floor(-7/3) = -3, remainder 2);
  // 2 = 1 + 1 + 0.
  CHECK(read(rs[0], 3).to_vector<int64_t>() == std::vector<int64_t>{4, -2, 1});
  CHECK(read(rs[1], 3).to_vector<int64_t>() == std::vector<int64_t>{3, -2, 1});
  CHECK(read(rs[2], 3).to_vector<int64_t>() == std::vector<int64_t>{3, -3, 0});
}

TEST_CASE_METHOD(replica_fixture,
                 "R4: replica actor: floating split assigns x / N to every "
                 "rank",
                 "[replica]") {
  auto r0 = spawn(0, 2);
  auto r1 = spawn(1, 2);
  auto init = tensor::from_list<double>({0.0, 0.0});
  auto info = info_of(1, "loss", init, synchronization::on_read,
                      aggregation::sum);
  create(r0, info, init);
  create(r1, info, init);
  auto x = tensor::from_list<double>({3.0, -5.0});
  REQUIRE(ask<ok_atom>(r0, component_split_atom::value, uint64_t{1}, x));
  REQUIRE(ask<ok_atom>(r1, component_split_atom::value, uint64_t{1}, x));
  CHECK(read(r0, 1).to_vector<double>() == std::vector<double>{1.5, -2.5});
  CHECK(read(r1, 1).to_vector<double>() == std::vector<double>{1.5, -2.5});
}

// -- host collectives -------------------------------------------------------------

TEST_CASE_METHOD(replica_fixture,
                 "W4: replica actor: a two-replica collective all-reduces the "
                 "contributions into both components",
                 "[replica][collective]") {
  auto r0 = spawn(0, 2);
  auto r1 = spawn(1, 2);
  constexpr size_t n = 40; // more than one 16-element granule per worker
  auto init = tensor::from_vector<float>({static_cast<int64_t>(n)},
                                         iota_floats(n, 100.f, 0.f));
  auto info = info_of(9, "weights", init, synchronization::on_write,
                      aggregation::sum);
  create(r0, info, init);
  create(r1, info, init);

  auto c0 = tensor::from_vector<float>({static_cast<int64_t>(n)},
                                       iota_floats(n, 0.f, 1.f));
  auto c1 = tensor::from_vector<float>({static_cast<int64_t>(n)},
                                       iota_floats(n, 1.f, 2.f));
  auto plan = sum_into_components(9, {c0, c1}, update_op::assign_add);

  auto v0 = ask<int64_t>(r0, collective_enter_atom::value, plan);
  auto v1 = ask<int64_t>(r1, collective_enter_atom::value, plan);
  REQUIRE(v0);
  REQUIRE(v1);
  CHECK(*v0 == -1);
  CHECK(*v1 == -1);
  auto& bound = plan->buffers.items[0].components;
  REQUIRE(bound[0] != nullptr);
  REQUIRE(bound[1] != nullptr);
  CHECK(bound[0] != bound[1]);
  REQUIRE(ask<ok_atom>(r0, collective_work_atom::value, plan));
  REQUIRE(ask<ok_atom>(r1, collective_work_atom::value, plan));
  self->send(r0, collective_leave_atom::value);
  self->send(r1, collective_leave_atom::value);

  std::vector<float> expected(n);
  for (size_t i = 0; i < n; ++i)
    expected[i] = 100.f + static_cast<float>(i) + (1.f + 2.f * static_cast<float>(i));
  auto a = read(r0, 9);
  auto b = read(r1, 9);
  CHECK(a.to_vector<float>() == expected);
  CHECK(b.to_vector<float>() == expected);
  CHECK(a.bitwise_equal(b)); // W7
  // The contributions themselves are untouched.
  CHECK(c0.to_vector<float>() == iota_floats(n, 0.f, 1.f));
}

TEST_CASE_METHOD(replica_fixture,
                 "replica actor: a collective reduces components into an "
                 "output tensor (the cross-replica read of on_read sum)",
                 "[replica][collective]") {
  auto r0 = spawn(0, 2);
  auto r1 = spawn(1, 2);
  auto info = info_of(2, "metric",
                      tensor::from_list<int32_t>({0, 0, 0}),
                      synchronization::on_read, aggregation::sum);
  create(r0, info, tensor::from_list<int32_t>({1, 2, 3}));
  create(r1, info, tensor::from_list<int32_t>({1, 2, 3}));
  REQUIRE(ask<ok_atom>(r1, local_update_atom::value, uint64_t{2},
                       update_op::assign_add,
                       tensor::from_list<int32_t>({10, 20, 30})));

  auto plan = std::make_shared<collective_plan>();
  plan->num_replicas = 2;
  auto& item = plan->add_item();
  item.variable_id = 2;
  item.type = dtype::int32;
  item.count = 3;
  item.rop = reduce_op::sum;
  item.source = collective_source::components;
  item.target = collective_target::output;
  item.result = tensor::empty(dtype::int32, {3});
  auto run = run_of(plan);

  REQUIRE(ask<int64_t>(r0, collective_enter_atom::value, run));
  REQUIRE(ask<int64_t>(r1, collective_enter_atom::value, run));
  REQUIRE(ask<ok_atom>(r0, collective_work_atom::value, run));
  REQUIRE(ask<ok_atom>(r1, collective_work_atom::value, run));
  self->send(r0, collective_leave_atom::value);
  self->send(r1, collective_leave_atom::value);
  CHECK(plan->items[0].result.to_vector<int32_t>()
        == std::vector<int32_t>{12, 24, 36});
  // Reading does not change the components.
  CHECK(read(r0, 2).to_vector<int32_t>() == std::vector<int32_t>{1, 2, 3});
  CHECK(read(r1, 2).to_vector<int32_t>() == std::vector<int32_t>{11, 22, 33});
}

TEST_CASE_METHOD(replica_fixture,
                 "W4: replica actor: collective_enter reports the first item "
                 "whose contributions differ where aggregation none requires "
                 "equality",
                 "[replica][collective]") {
  auto r0 = spawn(0, 2);
  auto r1 = spawn(1, 2);
  auto x = tensor::scalar<float>(1.f);
  create(r0, info_of(1, "a", x), x);
  create(r1, info_of(1, "a", x), x);
  create(r0, info_of(2, "b", x), x);
  create(r1, info_of(2, "b", x), x);

  auto plan = std::make_shared<collective_plan>();
  plan->num_replicas = 2;
  auto add = [&](uint64_t id, float c0, float c1) {
    auto& item = plan->add_item();
    item.variable_id = id;
    item.type = dtype::float32;
    item.count = 1;
    item.require_equal = true;
    item.first_only = true;
    item.uop = update_op::assign;
    item.source = collective_source::contributions;
    item.target = collective_target::components;
    item.contributions = {tensor::scalar<float>(c0), tensor::scalar<float>(c1)};
  };
  add(1, 5.f, 5.f); // equal: fine
  add(2, 5.f, 6.f); // differs on replica 1
  auto run = run_of(plan);

  auto v0 = ask<int64_t>(r0, collective_enter_atom::value, run);
  auto v1 = ask<int64_t>(r1, collective_enter_atom::value, run);
  REQUIRE(v0);
  REQUIRE(v1);
  CHECK(*v0 == -1);
  CHECK(*v1 == 1);
  // The coordinator would abort here: leave without working.
  self->send(r0, collective_leave_atom::value);
  self->send(r1, collective_leave_atom::value);
  CHECK(read(r0, 1).bitwise_equal(x));
  CHECK(read(r1, 2).bitwise_equal(x));
}

TEST_CASE_METHOD(replica_fixture,
                 "replica actor: while entered in a collective, a local_read "
                 "is answered only after collective_leave",
                 "[replica][collective]") {
  auto r0 = spawn(0, 2);
  auto r1 = spawn(1, 2);
  auto init = tensor::from_list<float>({1.f, 2.f});
  auto info = info_of(4, "w", init, synchronization::on_write, aggregation::sum);
  create(r0, info, init);
  create(r1, info, init);
  auto plan = sum_into_components(
    4, {tensor::from_list<float>({10.f, 20.f}),
        tensor::from_list<float>({30.f, 40.f})},
    update_op::assign);

  REQUIRE(ask<int64_t>(r0, collective_enter_atom::value, plan));
  REQUIRE(ask<int64_t>(r1, collective_enter_atom::value, plan));

  // An event-based actor bound to replica 1 reads its component and reports
  // the answer to this test.
  auto client = caf::actor_cast<caf::actor>(self);
  // `client` is a spawn argument: CAF 0.17 binds a reference through a null
  // pointer when a function actor gets no arguments (UBSan).
  auto reader = sys.spawn([r1](caf::event_based_actor* ev,
                               caf::actor client) -> caf::behavior {
    ev->request(r1, caf::infinite, local_read_atom::value, uint64_t{4})
      .then(
        [ev, client](tensor& t) {
          ev->send(client, std::move(t));
          ev->quit();
        },
        [ev, client](caf::error& err) {
          ev->send(client, err);
          ev->quit();
        });
    return {[](ok_atom) {}};
  }, client);
  stop_at_end(reader);

  bool answered_early = false;
  self->receive([&](tensor&) { answered_early = true; },
                [&](caf::error&) { answered_early = true; },
                caf::after(std::chrono::milliseconds(100)) >> [] {});
  CHECK_FALSE(answered_early);

  REQUIRE(ask<ok_atom>(r0, collective_work_atom::value, plan));
  REQUIRE(ask<ok_atom>(r1, collective_work_atom::value, plan));
  if (!answered_early) {
    bool still_early = false;
    self->receive([&](tensor&) { still_early = true; },
                  [&](caf::error&) { still_early = true; },
                  caf::after(std::chrono::milliseconds(50)) >> [] {});
    CHECK_FALSE(still_early); // collective_work does not release it either
  }
  self->send(r0, collective_leave_atom::value);
  self->send(r1, collective_leave_atom::value);

  if (!answered_early) {
    std::optional<tensor> got;
    caf::error err;
    bool timed_out = false;
    self->receive([&](tensor& t) { got = t; },
                  [&](caf::error& e) { err = e; },
                  caf::after(test::reply_deadline) >> [&] { timed_out = true; });
    REQUIRE_FALSE(timed_out);
    INFO(describe_result(err));
    REQUIRE(got);
    // The post-collective value: 10 + 30, 20 + 40.
    CHECK(got->to_vector<float>() == std::vector<float>{40.f, 60.f});
  }
}

TEST_CASE_METHOD(replica_fixture,
                 "replica actor: requests queued during a collective run in "
                 "arrival order after collective_leave",
                 "[replica][collective]") {
  auto r0 = spawn(0, 1);
  auto init = tensor::scalar<int32_t>(1);
  create(r0, info_of(1, "n", init, synchronization::on_read, aggregation::sum),
         init);
  auto plan = sum_into_components(1, {tensor::scalar<int32_t>(100)},
                                  update_op::assign);
  REQUIRE(ask<int64_t>(r0, collective_enter_atom::value, plan));
  // Fire-and-forget requests from a second scoped actor while quiesced.
  caf::scoped_actor other{sys};
  auto h1 = other->request(r0, test::reply_deadline, local_update_atom::value,
                           uint64_t{1}, update_op::assign_add,
                           tensor::scalar<int32_t>(5));
  auto h2 = other->request(r0, test::reply_deadline, local_read_atom::value,
                           uint64_t{1});
  REQUIRE(ask<ok_atom>(r0, collective_work_atom::value, plan));
  self->send(r0, collective_leave_atom::value);
  bool update_ok = false;
  h1.receive([&](ok_atom) { update_ok = true; }, [](caf::error&) {});
  CHECK(update_ok);
  std::vector<int32_t> seen;
  h2.receive([&](tensor& t) { seen = t.to_vector<int32_t>(); },
             [](caf::error&) {});
  // The collective assigned 100 first, then the deferred update added 5.
  CHECK(seen == std::vector<int32_t>{105});
}

// -- replica steps --------------------------------------------------------------

TEST_CASE_METHOD(replica_fixture,
                 "W4/R1: replica actor: a step records on_write updates in its "
                 "report and applies on_read updates locally at once",
                 "[replica][step]") {
  auto r = spawn(1, 2);
  auto x = tensor::scalar<float>(1.f);
  auto w_info = info_of(1, "w", x, synchronization::on_write, aggregation::sum);
  auto m_info = info_of(2, "m", x, synchronization::on_read, aggregation::sum);
  auto n_info = info_of(3, "n", x, synchronization::none, aggregation::none);
  create(r, w_info, x);
  create(r, m_info, x);
  create(r, n_info, x);

  auto step = std::make_shared<add_step>(
    std::vector<variable>{variable{w_info}, variable{m_info}, variable{n_info},
                          variable{w_info}},
    2.0, 1);
  auto report = ask<step_report>(r, step_atom::value, uint64_t{1},
                                 replica_step_ptr{step});
  INFO(describe_result(report));
  REQUIRE(report);
  CHECK(step->errors.empty());
  // Only the on_write updates are recorded, in issue order.
  REQUIRE(report->updates.size() == 2);
  for (auto& u : report->updates) {
    CHECK(u.variable_id == 1);
    CHECK(u.op == update_op::assign_add);
    CHECK(u.value.to_vector<float>() == std::vector<float>{2.f});
  }
  // The on_read update was visible inside the step right after it was made.
  REQUIRE(step->seen_after_update);
  CHECK(step->seen_after_update->to_vector<float>() == std::vector<float>{3.f});
  // on_read and none changed at once; on_write waits for the collective.
  CHECK(read(r, 1).to_vector<float>() == std::vector<float>{1.f});
  CHECK(read(r, 2).to_vector<float>() == std::vector<float>{3.f});
  CHECK(read(r, 3).to_vector<float>() == std::vector<float>{3.f});
}

TEST_CASE_METHOD(replica_fixture,
                 "replica actor: a step that updates a missing variable fails "
                 "with unknown_variable",
                 "[replica][step]") {
  auto r = spawn(0, 2);
  auto x = tensor::scalar<float>(1.f);
  auto ghost = info_of(77, "ghost", x, synchronization::on_write,
                       aggregation::sum);
  auto step = std::make_shared<add_step>(std::vector<variable>{variable{ghost}},
                                         1.0, 0);
  auto report = ask<step_report>(r, step_atom::value, uint64_t{1}, replica_step_ptr{step});
  REQUIRE_FALSE(report);
  CHECK(has_code(report.error(), errc::unknown_variable));
}

TEST_CASE_METHOD(replica_fixture,
                 "replica actor: a step that throws fails with replica_failed "
                 "and the replica exits with that error (fail-stop)",
                 "[replica][step]") {
  auto r = spawn(0, 1);
  auto x = tensor::scalar<float>(1.f);
  create(r, info_of(1, "w", x), x);
  self->monitor(r);
  auto report = ask<step_report>(r, step_atom::value, uint64_t{1},
                                 replica_step_ptr{std::make_shared<throwing_step>()});
  REQUIRE_FALSE(report);
  CHECK(has_code(report.error(), errc::replica_failed));
  CHECK(message_of(report.error()).find("boom") != std::string::npos);
  caf::error reason;
  self->receive([&](caf::down_msg& msg) { reason = msg.reason; },
                caf::after(std::chrono::seconds(10)) >> [] {});
  CHECK(has_code(reason, errc::replica_failed));
  CHECK(message_of(reason).find("boom") != std::string::npos);
}

TEST_CASE_METHOD(replica_fixture,
                 "replica actor: with fail_step a step that throws fails with "
                 "replica_failed and the replica keeps serving",
                 "[replica][step]") {
  auto r = spawn(0, 1, on_step_exception::fail_step);
  auto x = tensor::scalar<float>(1.f);
  create(r, info_of(1, "w", x), x);
  auto report = ask<step_report>(r, step_atom::value, uint64_t{1},
                                 replica_step_ptr{std::make_shared<throwing_step>()});
  REQUIRE_FALSE(report);
  CHECK(has_code(report.error(), errc::replica_failed));
  CHECK(read(r, 1).bitwise_equal(x));
}

// -- who may send component messages -------------------------------------------

TEST_CASE_METHOD(replica_fixture,
                 "replica actor: component, step and collective messages are "
                 "accepted only from the actor that bound it",
                 "[replica]") {
  auto r = spawn(0, 1); // bound to `self`
  auto x = tensor::scalar<float>(1.f);
  create(r, info_of(1, "w", x), x);
  // Another actor: refused, the component unchanged.
  caf::scoped_actor other{sys};
  caf::expected<ok_atom> res{ok_atom::value};
  other->request(r, test::reply_deadline, component_update_atom::value,
                 uint64_t{1}, update_op::assign, tensor::scalar<float>(5.f))
    .receive([&](ok_atom) {}, [&](caf::error& err) { res = err; });
  REQUIRE_FALSE(res);
  CHECK(has_code(res.error(), errc::invalid_argument));
  // A second bind does not take the replica over.
  other->send(r, bind_atom::value);
  caf::expected<tensor> read_by_other{tensor{}};
  other->request(r, test::reply_deadline, component_read_atom::value,
                 uint64_t{1})
    .receive([&](tensor&) {}, [&](caf::error& err) { read_by_other = err; });
  REQUIRE_FALSE(read_by_other);
  CHECK(has_code(read_by_other.error(), errc::invalid_argument));
  CHECK(read(r, 1).to_vector<float>() == std::vector<float>{1.f});
  // Local operations stay open to anyone.
  caf::expected<tensor> local{make_error(errc::timeout, "no reply")};
  other->request(r, test::reply_deadline, local_read_atom::value, uint64_t{1})
    .receive([&](tensor& t) { local = std::move(t); },
             [&](caf::error& err) { local = err; });
  REQUIRE(local);
}

TEST_CASE_METHOD(replica_fixture,
                 "replica actor: an unbound replica refuses component messages",
                 "[replica]") {
  auto r = spawn_replica(sys, {0, 1, device_id{device_kind::host, 0}, {},
                               on_step_exception::stop_replica});
  REQUIRE(r);
  stop_at_end(*r);
  auto x = tensor::scalar<float>(1.f);
  auto res = ask<ok_atom>(*r, component_create_atom::value, shared(info_of(1, "w", x)), x);
  REQUIRE_FALSE(res);
  CHECK(has_code(res.error(), errc::invalid_argument));
}

TEST_CASE_METHOD(replica_fixture,
                 "V4: replica actor: an out-of-range update_op on a component "
                 "or a local update is invalid_argument and the replica "
                 "keeps serving",
                 "[replica][validation]") {
  auto r = spawn(0, 1);
  auto x = tensor::from_list<float>({1.f, 2.f});
  create(r, info_of(1, "w", x), x);
  create(r, info_of(2, "m", x, synchronization::on_read, aggregation::sum), x);
  auto err = update(r, 1, static_cast<update_op>(99), x);
  CHECK(has_code(err, errc::invalid_argument));
  CHECK(message_of(err).find("'w'") != std::string::npos);
  CHECK(message_of(err).find("99") != std::string::npos);
  auto local = ask<ok_atom>(r, local_update_atom::value, uint64_t{2},
                            static_cast<update_op>(7), x);
  REQUIRE_FALSE(local);
  CHECK(has_code(local.error(), errc::invalid_argument));
  CHECK(read(r, 1).to_vector<float>() == std::vector<float>{1.f, 2.f});
  CHECK(read(r, 2).to_vector<float>() == std::vector<float>{1.f, 2.f});
  REQUIRE_FALSE(update(r, 1, update_op::assign_add, x));
  CHECK(read(r, 1).to_vector<float>() == std::vector<float>{2.f, 4.f});
}

TEST_CASE_METHOD(replica_fixture,
                 "V4: replica actor: a component update that overflows int64 "
                 "fails with overflow and leaves the component unchanged",
                 "[replica][validation]") {
  auto r = spawn(0, 1);
  auto x = tensor::from_vector<int64_t>({2}, {1, 2});
  create(r, info_of(1, "big", x), x);
  auto y = tensor::from_vector<int64_t>(
    {2}, {0, std::numeric_limits<int64_t>::max() - 1});
  auto err = update(r, 1, update_op::assign_add, y);
  CHECK(has_code(err, errc::overflow));
  CHECK(message_of(err).find("element 1") != std::string::npos);
  CHECK(read(r, 1).to_vector<int64_t>() == std::vector<int64_t>{1, 2});
}

// -- overload (V3) and local_add ------------------------------------------------------

namespace {

struct bounded_replica_fixture : replica_fixture {
  std::shared_ptr<std::atomic<uint64_t>> dropped
    = std::make_shared<std::atomic<uint64_t>>(0);

  // A replica that defers at most `max_deferred` operations; `delay` > 0
  // delays every operation after the first (the create).
  replica_actor spawn_bounded(size_t max_deferred,
                              std::chrono::milliseconds delay) {
    replica_config rc{0, 1, device_id{device_kind::host, 0}, {},
                      on_step_exception::stop_replica, max_deferred, dropped};
    if (delay.count() > 0)
      rc.faults.push_back(delay_replica(0, delay, 2));
    auto r = spawn_replica(sys, rc);
    REQUIRE(r);
    stop_at_end(*r);
    self->send(*r, bind_atom::value);
    return *r;
  }
};

} // namespace

TEST_CASE_METHOD(bounded_replica_fixture,
                 "V3: replica actor: local requests the replica would defer "
                 "beyond max_queued_operations are refused at once with "
                 "overloaded",
                 "[replica][overload]") {
  auto r = spawn_bounded(4, std::chrono::milliseconds(100));
  auto x = tensor::scalar<int64_t>(0);
  create(r, info_of(1, "counter", x, synchronization::on_read,
                    aggregation::sum),
         x);
  constexpr int n = 40;
  auto send_one = [&] {
    return self->request(r, test::reply_deadline, local_update_atom::value,
                         uint64_t{1}, update_op::assign_add,
                         tensor::scalar<int64_t>(1));
  };
  std::vector<decltype(send_one())> handles;
  for (int i = 0; i < n; ++i)
    handles.push_back(send_one());
  // One more while 4 wait: refused at once, not after the queue (4 x
  // 100 ms) or the deadline.
  auto t0 = std::chrono::steady_clock::now();
  auto probe = ask<tensor>(r, local_read_atom::value, uint64_t{1});
  auto probe_took = std::chrono::steady_clock::now() - t0;
  REQUIRE_FALSE(probe);
  CHECK(has_code(probe.error(), errc::overloaded));
  CHECK(probe_took < std::chrono::milliseconds(300));
  int ok = 0;
  int refused = 0;
  for (auto& h : handles)
    h.receive([&](ok_atom) { ++ok; },
              [&](caf::error& err) {
                CHECK(has_code(err, errc::overloaded));
                ++refused;
              });
  // 4 deferred (more only if the machine stalled for a whole delay).
  CHECK(ok >= 4);
  CHECK(ok + refused == n);
  CHECK(refused >= n / 2);
  // Recovery: the queue drained, local requests are served again.
  auto value = ask<tensor>(r, local_read_atom::value, uint64_t{1});
  REQUIRE(value);
  CHECK(value->to_vector<int64_t>() == std::vector<int64_t>{static_cast<int64_t>(ok)});
}

TEST_CASE_METHOD(bounded_replica_fixture,
                 "replica actor: local_add adds to on_read and none scalars "
                 "without a reply, what it cannot apply is counted",
                 "[replica][local_add]") {
  auto r = spawn_bounded(4096, std::chrono::milliseconds(0));
  create(r, info_of(1, "hits", tensor::scalar<int64_t>(0),
                    synchronization::on_read, aggregation::sum),
         tensor::scalar<int64_t>(0));
  create(r, info_of(2, "local", tensor::scalar<float>(1.f),
                    synchronization::none, aggregation::none),
         tensor::scalar<float>(1.f));
  create(r, info_of(3, "mirrored", tensor::scalar<float>(0.f),
                    synchronization::on_write, aggregation::sum),
         tensor::scalar<float>(0.f));
  create(r, info_of(4, "small", tensor::scalar<int32_t>(2147483600),
                    synchronization::on_read, aggregation::sum),
         tensor::scalar<int32_t>(2147483600));
  create(r, info_of(5, "vector", tensor::zeros(dtype::float32, {2}),
                    synchronization::on_read, aggregation::sum),
         tensor::zeros(dtype::float32, {2}));
  for (int i = 0; i < 1000; ++i)
    self->send(r, local_add_atom::value, uint64_t{1}, 1.0);
  self->send(r, local_add_atom::value, uint64_t{2}, 0.5);
  // Not applied, each counted: on_write, overflow of int32, a fraction for
  // an integer, a non-scalar, an unknown variable.
  self->send(r, local_add_atom::value, uint64_t{3}, 1.0);
  self->send(r, local_add_atom::value, uint64_t{4}, 100.0);
  self->send(r, local_add_atom::value, uint64_t{1}, 0.5);
  self->send(r, local_add_atom::value, uint64_t{5}, 1.0);
  self->send(r, local_add_atom::value, uint64_t{99}, 1.0);
  // Messages of one sender arrive in order: the read sees every add.
  auto hits = ask<tensor>(r, local_read_atom::value, uint64_t{1});
  REQUIRE(hits);
  CHECK(hits->to_vector<int64_t>() == std::vector<int64_t>{1000});
  auto local = ask<tensor>(r, local_read_atom::value, uint64_t{2});
  REQUIRE(local);
  CHECK(local->to_vector<float>() == std::vector<float>{1.5f});
  CHECK(read(r, 3).to_vector<float>() == std::vector<float>{0.f});
  CHECK(read(r, 4).to_vector<int32_t>() == std::vector<int32_t>{2147483600});
  CHECK(dropped->load() == 5);
}

TEST_CASE_METHOD(bounded_replica_fixture,
                 "V3: replica actor: local_add beyond max_queued_operations "
                 "deferred is dropped and counted, the rest applied",
                 "[replica][local_add][overload]") {
  auto r = spawn_bounded(4, std::chrono::milliseconds(100));
  auto x = tensor::scalar<int64_t>(0);
  create(r, info_of(1, "hits", x, synchronization::on_read, aggregation::sum),
         x);
  for (int i = 0; i < 40; ++i)
    self->send(r, local_add_atom::value, uint64_t{1}, 1.0);
  // Refused too while 4 are deferred; then served once they drained.
  auto refused = ask<tensor>(r, local_read_atom::value, uint64_t{1});
  REQUIRE_FALSE(refused);
  CHECK(has_code(refused.error(), errc::overloaded));
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  auto hits = ask<tensor>(r, local_read_atom::value, uint64_t{1});
  REQUIRE(hits);
  auto applied = hits->to_vector<int64_t>().at(0);
  CHECK(applied >= 4);
  CHECK(applied + static_cast<int64_t>(dropped->load()) == 40);
  CHECK(dropped->load() >= 20);
}

// -- contributions kept on the device ----------------------------------------

namespace {

struct buffer_step final : replica_step {
  explicit buffer_step(variable v) : var(std::move(v)) {}

  void run(replica_context& ctx) override {
    auto buf = ctx.contribution_buffer(var);
    if (!buf) {
      errors.push_back(buf.error());
      return;
    }
    std::vector<float> x(static_cast<size_t>(buf->size), 4.f);
    std::memcpy(buf->data, x.data(), buf->nbytes());
    if (auto err = ctx.update_from_device(var, update_op::assign_add,
                                          buf->data))
      errors.push_back(err);
  }

  variable var;
  std::vector<caf::error> errors;
};

} // namespace

TEST_CASE_METHOD(replica_fixture,
                 "W4: replica actor: on a host replica a contribution buffer "
                 "travels as the report's value (nothing stays staged)",
                 "[replica][step]") {
  auto r = spawn(0, 1);
  auto x = tensor::from_list<float>({1.f, 2.f});
  auto w_info = info_of(1, "w", x, synchronization::on_write, aggregation::sum);
  create(r, w_info, x);
  auto step = std::make_shared<buffer_step>(variable{w_info});
  auto report = ask<step_report>(r, step_atom::value, uint64_t{7},
                                 replica_step_ptr{step});
  REQUIRE(report);
  CHECK(step->errors.empty());
  REQUIRE(report->updates.size() == 1);
  CHECK(report->updates[0].staged == 0);
  CHECK(report->updates[0].value.to_vector<float>()
        == std::vector<float>{4.f, 4.f});
}

TEST_CASE_METHOD(replica_fixture,
                 "V2: replica actor: a collective that names a staging buffer "
                 "the replica does not hold fails at enter",
                 "[replica][collective]") {
  auto r = spawn(0, 1);
  auto x = tensor::from_list<float>({1.f, 2.f});
  create(r, info_of(1, "w", x), x);
  auto plan = sum_into_components(1, {tensor{}}, update_op::assign_add);
  auto& item = plan->plan->items[0];
  item.type = dtype::float32;
  item.count = 2;
  item.staged[0] = 5;
  plan->buffers.items[0].inputs[0] = nullptr;
  auto entered = ask<int64_t>(r, collective_enter_atom::value, plan);
  REQUIRE_FALSE(entered);
  CHECK(has_code(entered.error(), errc::invalid_argument));
  CHECK(message_of(entered.error()).find("staging buffer #5")
        != std::string::npos);
  self->send(r, collective_leave_atom::value);
  CHECK(read(r, 1).bitwise_equal(x));
}

// -- coroutine steps (X1-X5) ----------------------------------------------------

namespace {

/// A coroutine step for one replica: adds 1 to `w`, waits at an all_reduce
/// of 5, then adds the result to `w`.
replica_step_ptr waiting_step(const variable_info& w, std::atomic<int>& live) {
  variable v{w};
  return make_step(
    [v, &live](replica_context& ctx) -> step_task<> {
      ++live;
      struct leave {
        std::atomic<int>* n;
        ~leave() { --*n; }
      } guard{&live};
      if (auto err = ctx.assign_add(v, 1.0))
        throw std::runtime_error(describe(err));
      auto y = co_await ctx.all_reduce(reduce_op::sum, tensor::scalar<float>(5));
      if (auto err = ctx.assign_add(v, y.as_double(0)))
        throw std::runtime_error(describe(err));
    },
    2);
}

} // namespace

TEST_CASE_METHOD(replica_fixture,
                 "X2: replica actor: a coroutine step answers suspended with "
                 "its contribution, holds other operations until it goes on, "
                 "and then reports its updates",
                 "[replica][step]") {
  auto r = spawn(0, 2);
  auto x = tensor::scalar<float>(1.f);
  auto w = info_of(1, "w", x, synchronization::on_write, aggregation::sum);
  create(r, w, x);
  std::atomic<int> live{0};
  auto report = ask<step_report>(r, step_atom::value, uint64_t{1},
                                 waiting_step(w, live));
  INFO(describe_result(report));
  REQUIRE(report);
  CHECK(report->suspended);
  CHECK(report->updates.empty());
  CHECK(report->collective.kind == step_collective_kind::all_reduce);
  REQUIRE(report->collective.values.size() == 1);
  CHECK(report->collective.values[0].as_double(0) == 5);
  CHECK(live.load() == 1);
  // A read waits while the step waits.
  self->send(r, component_read_atom::value, uint64_t{1});
  bool answered = false;
  self->receive([&](tensor&) { answered = true; },
                caf::after(std::chrono::milliseconds(200)) >> [] {});
  CHECK_FALSE(answered);
  // The coordinator's result: the step goes on and ends.
  auto last = ask<step_report>(r, step_resume_atom::value, uint64_t{1},
                               std::vector<tensor>{tensor::scalar<float>(10)});
  INFO(describe_result(last));
  REQUIRE(last);
  CHECK_FALSE(last->suspended);
  REQUIRE(last->updates.size() == 2);
  CHECK(last->updates[0].value.as_double(0) == 1);
  CHECK(last->updates[1].value.as_double(0) == 10);
  CHECK(live.load() == 0);
  // The held read ran after it, on the unchanged component.
  self->receive([&](tensor& t) { answered = t.as_double(0) == 1; },
                caf::after(std::chrono::seconds(10)) >> [] {});
  CHECK(answered);
}

TEST_CASE_METHOD(replica_fixture,
                 "X3: replica actor: step_abort ends a waiting step (its frame "
                 "destroyed) or one not started, and step_resume of a step that "
                 "does not wait is refused",
                 "[replica][step]") {
  auto r = spawn(0, 2, on_step_exception::fail_step);
  auto x = tensor::scalar<float>(1.f);
  auto w = info_of(1, "w", x, synchronization::on_write, aggregation::sum);
  create(r, w, x);
  std::atomic<int> live{0};
  auto refused = ask<step_report>(r, step_resume_atom::value, uint64_t{1},
                                  std::vector<tensor>{});
  REQUIRE_FALSE(refused);
  CHECK(has_code(refused.error(), errc::invalid_argument));
  REQUIRE(ask<step_report>(r, step_atom::value, uint64_t{1},
                           waiting_step(w, live)));
  CHECK(live.load() == 1);
  self->send(r, step_abort_atom::value, uint64_t{1});
  // Step 3 is abandoned before it reaches the replica.
  self->send(r, step_abort_atom::value, uint64_t{3});
  CHECK(read(r, 1).bitwise_equal(x)); // served: the step is gone
  CHECK(live.load() == 0);
  auto late = ask<step_report>(r, step_resume_atom::value, uint64_t{1},
                               std::vector<tensor>{tensor::scalar<float>(1)});
  CHECK_FALSE(late);
  auto abandoned = ask<step_report>(r, step_atom::value, uint64_t{3},
                                    waiting_step(w, live));
  REQUIRE_FALSE(abandoned);
  CHECK(live.load() == 0);
  // The replica keeps serving steps.
  auto next = ask<step_report>(r, step_atom::value, uint64_t{4},
                               waiting_step(w, live));
  REQUIRE(next);
  CHECK(next->suspended);
  self->send(r, step_abort_atom::value, uint64_t{4});
  CHECK(read(r, 1).bitwise_equal(x));
  CHECK(live.load() == 0); // before `live` goes out of scope
}
