#include "fixture.hpp"

#include <filesystem>
#include <future>

#include <unistd.h>

#include "varsync/checkpoint.hpp"

using namespace vs_test;

TEST_CASE("C1: auto resolves to on_write at creation for any replica count") {
  for (int n : {1, 4}) {
    auto s = make_strategy(n);
    auto v = make_var(s, "w", tensor::scalar<float>(1), synchronization::auto_);
    CHECK(v.synchronization() == synchronization::on_write);
    auto looked_up = VS_VALUE(s.lookup("w"));
    CHECK(looked_up.synchronization() == synchronization::on_write);
  }
}

TEST_CASE("C2: none is accepted and keeps independent local components") {
  auto s = make_strategy(3);
  auto v = make_var(s, "scratch", tensor::scalar<float>(0),
                    synchronization::none);
  CHECK(v.synchronization() == synchronization::none);
  VS_REQUIRE_OK(s.run([&](replica_context& ctx) {
    VS_STEP_OK(ctx.assign(v, 10.0 * (ctx.replica_id() + 1)));
  }));
  CHECK(components(s, v) == std::vector<double>{10, 20, 30});
  auto one = make_strategy(1);
  auto w = make_var(one, "scratch", tensor::scalar<float>(5),
                    synchronization::none);
  CHECK(VS_VALUE(one.local_values(w)).size() == 1);
}

TEST_CASE("C3: none synchronization rejects any aggregation but none") {
  auto s = make_strategy(2);
  for (auto agg : {aggregation::sum, aggregation::mean,
                   aggregation::only_first_replica}) {
    auto v = s.create_variable("x", tensor::scalar<float>(1),
                               synchronization::none, agg);
    VS_CHECK_CODE(error_of(v), invalid_argument);
  }
  CHECK(VS_VALUE(s.variables()).empty());
  CHECK(s.create_variable("x", tensor::scalar<float>(1), synchronization::none,
                          aggregation::none));
}

TEST_CASE("C4: trainable defaults to false for on_read and true otherwise, "
          "trainable on_read is rejected") {
  auto s = make_strategy(2);
  CHECK_FALSE(make_var(s, "r", tensor::scalar<float>(0),
                       synchronization::on_read, aggregation::sum)
                .trainable());
  CHECK(make_var(s, "w", tensor::scalar<float>(0), synchronization::on_write)
          .trainable());
  CHECK(make_var(s, "n", tensor::scalar<float>(0), synchronization::none)
          .trainable());
  auto bad = s.create_variable("r2", tensor::scalar<float>(0),
                               synchronization::on_read, aggregation::sum,
                               true);
  VS_CHECK_CODE(error_of(bad), invalid_argument);
  CHECK_FALSE(s.lookup("r2"));
  auto explicit_false = s.create_variable(
    "r3", tensor::scalar<float>(0), synchronization::on_read, aggregation::sum,
    false);
  CHECK(explicit_false);
}

TEST_CASE("C5: mean aggregation needs a floating dtype") {
  auto s = make_strategy(2);
  for (auto sync : {synchronization::on_write, synchronization::on_read}) {
    auto v = s.create_variable("i", tensor::scalar<int32_t>(1), sync,
                               aggregation::mean);
    REQUIRE_FALSE(v);
    VS_CHECK_CODE(v.error(), invalid_argument);
    auto text = message_of(v.error());
    CHECK(text.find("sum") != std::string::npos);
    CHECK(text.find("only_first_replica") != std::string::npos);
    auto w = s.create_variable("l", tensor::scalar<int64_t>(1), sync,
                               aggregation::mean);
    VS_CHECK_CODE(error_of(w), invalid_argument);
  }
  int k = 0;
  for (auto t : {dtype::float16, dtype::bfloat16, dtype::float32,
                 dtype::float64})
    CHECK(s.create_variable("f" + std::to_string(k++), tensor::zeros(t, {}),
                            synchronization::on_write, aggregation::mean));
}

TEST_CASE("C6: every component starts bitwise equal to the initial value") {
  auto s = make_strategy(4);
  auto init = tensor::from_vector<float>({3}, {1.5f, -2.25f, 1e-30f});
  int k = 0;
  for (auto sync : {synchronization::on_write, synchronization::on_read,
                    synchronization::none}) {
    auto v = make_var(s, "v" + std::to_string(k++), init, sync);
    for (auto& c : VS_VALUE(s.local_values(v)))
      CHECK(c.bitwise_equal(init));
  }
  auto counter = make_var(s, "sum", tensor::scalar<float>(2.5f),
                          synchronization::on_read, aggregation::sum);
  CHECK(read_scalar(s, counter) == 10.0); // N·x, as in TF
}

TEST_CASE("C7: names are unique, dtype and shape are fixed at creation") {
  auto s = make_strategy(2);
  auto v = make_var(s, "v", tensor::from_vector<float>({2}, {1, 2}),
                    synchronization::on_write);
  auto dup = s.create_variable("v", tensor::scalar<float>(0));
  VS_CHECK_CODE(error_of(dup), already_exists);
  CHECK(message_of(dup.error()).find("'v'") != std::string::npos);
  auto before = take_snapshot(s);
  VS_CHECK_CODE(s.assign(v, tensor::from_vector<double>({2}, {1, 2})),
                dtype_mismatch);
  VS_CHECK_CODE(s.assign(v, tensor::from_vector<float>({3}, {1, 2, 3})),
                shape_mismatch);
  VS_CHECK_CODE(s.assign(v, 1.0), shape_mismatch); // scalar into [2]
  CHECK(same(before, take_snapshot(s)));
  // Scalar overloads convert to the variable's dtype.
  auto i = make_var(s, "i", tensor::scalar<int32_t>(0),
                    synchronization::on_write);
  VS_REQUIRE_OK(s.assign(i, 41.0));
  VS_REQUIRE_OK(s.assign_add(i, 1.0));
  auto value = VS_VALUE(s.read(i));
  CHECK(value.type() == dtype::int32);
  CHECK(value.data<int32_t>()[0] == 42);
  VS_CHECK_CODE(s.assign(i, 2.5), invalid_argument);
  CHECK(read_scalar(s, i) == 42);
}

TEST_CASE("C8: float32, float64, int32, int64, float16 and bfloat16 on host") {
  auto s = make_strategy(2);
  int k = 0;
  for (auto t : {dtype::float32, dtype::float64, dtype::int32, dtype::int64,
                 dtype::float16, dtype::bfloat16}) {
    INFO("dtype " << to_string(t));
    auto v = make_var(s, "v" + std::to_string(k++), tensor::filled(t, {4}, 3),
                      synchronization::on_write, aggregation::sum);
    VS_REQUIRE_OK(s.assign_add(v, tensor::filled(t, {4}, 2)));
    VS_REQUIRE_OK(s.run([&](replica_context& ctx) {
      VS_STEP_OK(ctx.assign_add(v, tensor::filled(t, {4}, 1)));
    }));
    auto value = VS_VALUE(s.read(v));
    CHECK(value.type() == t);
    for (int64_t e = 0; e < 4; ++e)
      CHECK(value.as_double(e) == 7.0); // 3 + 2 + (1 + 1)
  }
}

TEST_CASE("C9: names that a checkpoint could not hold are refused at "
          "creation, naming the rule") {
  auto s = make_strategy(2);
  // A per-component variable whose entries are "a/replica_0", "a/replica_1".
  make_var(s, "a", tensor::scalar<float>(1), synchronization::none);
  struct bad_name {
    std::string name;
    std::string rule; // text the message must contain
  };
  std::vector<bad_name> bad = {
    {"", "non-empty"},
    {"__metadata__", "reserved"},
    {"__private", "reserved"},
    {"a/replica_0", "/replica_"},
    {"x/replica_7/y", "/replica_"},
    {std::string{"nul\0byte", 8}, "control character"},
    {"tab\there", "control character"},
    {"line\n", "control character"},
    {"del\x7f", "control character"},
    {"bad\xff utf8", "UTF-8"},
    {"overlong\xc0\xaf", "UTF-8"},
    {"surrogate\xed\xa0\x80", "UTF-8"},
    {std::string(257, 'n'), "256"},
    {std::string(64u << 20, 'n'), "256"},
  };
  for (auto& b : bad) {
    INFO("name of " << b.name.size() << " bytes: " << b.name.substr(0, 40));
    for (auto sync : {synchronization::on_write, synchronization::none}) {
      auto v = s.create_variable(b.name, tensor::scalar<float>(0), sync);
      VS_CHECK_CODE(error_of(v), invalid_argument);
      if (!v)
        CHECK(message_of(v.error()).find(b.rule) != std::string::npos);
    }
  }
  // Nothing was created.
  auto vars = VS_VALUE(s.variables());
  REQUIRE(vars.size() == 1);
  CHECK(vars[0].name() == "a");
}

TEST_CASE("C9: every accepted name at the edge of the rule saves and "
          "restores") {
  auto s = make_strategy(2);
  std::vector<std::string> good = {
    "x",
    std::string(256, 'n'),
    "_one_underscore",
    "a/b/c",
    "a/replica",
    "a/replica0",
    "layer.replicas",
    "__", // exactly the prefix is reserved too
    "gr\xc3\xb6\xc3\x9f" "e \xe2\x82\xac \xf0\x9f\x98\x80",
  };
  std::vector<variable> vars;
  for (auto& name : good) {
    INFO("name " << name.substr(0, 40));
    auto sync = vars.size() % 2 == 0 ? synchronization::none
                                     : synchronization::on_write;
    auto v = s.create_variable(name, tensor::scalar<float>(1), sync);
    if (name == "__") {
      VS_CHECK_CODE(error_of(v), invalid_argument);
      continue;
    }
    REQUIRE(v);
    vars.push_back(*v);
  }
  auto path = local_file((std::filesystem::temp_directory_path()
                          / ("varsync-c9-" + shared_run_id() + ".safetensors"))
                           .string());
  VS_REQUIRE_OK(save(s, path));
  for (auto& v : vars)
    VS_REQUIRE_OK(s.assign(v, 5.0 - (v.synchronization()
                                       == synchronization::none ? 0 : 1)));
  VS_REQUIRE_OK(restore(s, path));
  for (auto& v : vars) {
    INFO("variable " << v.name().substr(0, 40));
    auto values = VS_VALUE(s.local_values(v));
    for (auto& x : values)
      CHECK(x.as_double(0) == 1.0);
  }
  std::filesystem::remove(path);
}

TEST_CASE("C10: wait_for_variable returns a variable that exists, waits for "
          "one being created, and times out naming it") {
  auto s = make_strategy(2);
  auto w = make_var(s, "w", tensor::scalar<float>(1), synchronization::on_write,
                    aggregation::sum);
  CHECK(VS_VALUE(s.wait_for_variable("w")).id() == w.id());
  std::promise<caf::expected<variable>> waited;
  auto got = waited.get_future();
  s.async().wait_for_variable("later", [&](caf::expected<variable> v) {
    waited.set_value(std::move(v));
  });
  CHECK(got.wait_for(50ms) == std::future_status::timeout);
  auto later = make_var(s, "later", tensor::scalar<float>(2),
                        synchronization::on_write, aggregation::sum);
  REQUIRE(got.wait_for(10s) == std::future_status::ready);
  auto v = got.get();
  REQUIRE(v);
  CHECK(v->id() == later.id());
  auto never = s.with_timeout(200ms).wait_for_variable("never");
  REQUIRE_FALSE(never);
  VS_CHECK_CODE(never.error(), timeout);
  CHECK(message_of(never.error()).find("'never'") != std::string::npos);
  auto empty = s.wait_for_variable("");
  REQUIRE_FALSE(empty);
  VS_CHECK_CODE(empty.error(), invalid_argument);
  // Waiting changed nothing.
  CHECK(VS_VALUE(s.variables()).size() == 2);
}

TEST_CASE("P14: barrier returns at once in one process, and again") {
  auto s = make_strategy(2);
  VS_REQUIRE_OK(s.barrier());
  VS_REQUIRE_OK(s.barrier());
}

TEST_CASE("P15: a process that passes an error to agree gets it back "
          "(blocking, async, another category), and agree changes nothing") {
  // Every process passes the same outcomes: in one process and across
  // processes alike, each that failed gets its own error.
  auto s = make_strategy(2);
  auto w = make_var(s, "w", tensor::scalar<float>(3),
                    synchronization::on_write, aggregation::sum);
  VS_REQUIRE_OK(s.agree({}, "a save"));
  auto failed = s.agree(make_error(errc::invalid_argument, "disk full"),
                        "a save");
  VS_CHECK_CODE(failed, invalid_argument);
  CHECK(message_of(failed) == "disk full");
  // An error of another category comes back as it was passed.
  auto other = s.agree(caf::make_error(caf::sec::runtime_error), "a save");
  CHECK(other == caf::make_error(caf::sec::runtime_error));
  std::promise<caf::error> got;
  s.async().agree(make_error(errc::out_of_memory, "no room"), "a save",
                  [&](caf::error err) { got.set_value(std::move(err)); });
  auto async_failed = got.get_future().get();
  VS_CHECK_CODE(async_failed, out_of_memory);
  CHECK(VS_VALUE(s.read(w)).item<float>() == 3.0f);
  CHECK(VS_VALUE(s.variables()).size() == 1);
}
