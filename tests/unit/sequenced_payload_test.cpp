// Services mode's bulk data leaves the operation that crosses CAF
// (messages/sequenced_operation.hpp): what stays inline, what is deferred,
// and that restoring puts every byte back.

#include <catch2/catch.hpp>

#include <vector>

#include "messages/sequenced_operation.hpp"

using namespace varsync;

TEST_CASE("sequenced payload: small data stays inline, nothing changes") {
  auto op = make_sequenced(
    ops::update{3, update_op::assign,
                tensor::filled(dtype::float32, {1024}, 1.0)}); // 4096 bytes
  held_payload held;
  CHECK_FALSE(defer_payload(op, held));
  CHECK_FALSE(op.deferred.present);
  CHECK(std::get<ops::update>(op.op).value.size() == 1024);
  CHECK(inline_payload_bytes(op) == 4096);
  auto read = make_sequenced(ops::read{3});
  CHECK_FALSE(defer_payload(read, held));
}

TEST_CASE("sequenced payload: an update's value above the limit travels as "
          "its description, and comes back whole") {
  auto value = tensor::filled(dtype::float64, {64, 16}, 2.5);
  auto op = make_sequenced(ops::update{3, update_op::assign, value});
  held_payload held;
  REQUIRE(defer_payload(op, held));
  CHECK(inline_payload_bytes(op) == 0);
  CHECK(op.deferred.present);
  CHECK(op.deferred.type == dtype::float64);
  CHECK(op.deferred.shape == tensor_shape{64, 16});
  // nothing bulk left in the operation
  CHECK(std::get<ops::update>(op.op).value.nbytes() == 0);
  CHECK(payload_bytes(op.deferred) == 64 * 16 * 8);
  restore_payload(op, std::move(held));
  CHECK_FALSE(op.deferred.present);
  CHECK(std::get<ops::update>(op.op).value.bitwise_equal(value));
}

TEST_CASE("sequenced payload: a scatter's rows and indices and a create's "
          "initial value are deferred too") {
  auto scatter = make_sequenced(
    ops::scatter{3, scatter_op::update,
                 {std::vector<int64_t>(600, 1),
                  tensor::zeros(dtype::float32, {600, 1})}});
  held_payload held;
  REQUIRE(defer_payload(scatter, held));
  CHECK(std::get<ops::scatter>(scatter.op).slices.indices.empty());
  CHECK(scatter.deferred.indices == 600);
  CHECK(held.indices.size() == 600);
  CHECK(payload_bytes(scatter.deferred) == 600 * 4 + 600 * 8);
  variable_spec spec;
  spec.name = "table";
  spec.initial_value = tensor::zeros(dtype::int64, {1000});
  auto create = make_sequenced(ops::create{spec});
  held_payload initial;
  REQUIRE(defer_payload(create, initial));
  CHECK(std::get<ops::create>(create.op).spec.initial_value.nbytes() == 0);
  CHECK(std::get<ops::create>(create.op).spec.name == "table");
  CHECK(consistent(create));
  restore_payload(create, std::move(initial));
  CHECK(std::get<ops::create>(create.op).spec.initial_value.size() == 1000);
}

TEST_CASE("sequenced payload: descriptions no operation can have are "
          "refused") {
  deferred_payload p;
  p.present = true;
  p.shape = {-1};
  CHECK(payload_bytes(p) < 0);
  p.shape = {int64_t{1} << 40, 8};
  CHECK(payload_bytes(p) < 0);
  p.shape = {4};
  p.indices = -2;
  CHECK(payload_bytes(p) < 0);
  p.indices = 4;
  CHECK(payload_bytes(p) == 16 + 32);
}

TEST_CASE("sequenced payload: deferred data only where the operation has "
          "such data") {
  auto read = make_sequenced(ops::read{3});
  read.deferred.present = true;
  read.deferred.shape = {4};
  CHECK_FALSE(consistent(read));
  auto update = make_sequenced(ops::update{3, update_op::assign, {}});
  update.deferred.present = true;
  update.deferred.shape = {4};
  CHECK(consistent(update));
  update.deferred.indices = 4; // indices belong to scatters only
  CHECK_FALSE(consistent(update));
}
