// Saving what survives a replica failure (save_survivors, docs/checkpoints.md)
// and restoring such a file: save still refuses, save_survivors stores what
// is known per synchronization and marks what is lost, restore refuses the
// variables with lost components and restores the rest.

#include "../semantics/fixture.hpp"

#include <filesystem>
#include <fstream>
#include <future>
#include <iterator>

#include <caf/exit_reason.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>

#include "api/ext/safetensors_format.hpp"
#include "varsync/checkpoint.hpp"
#include "varsync/ext/checkpoint_actor.hpp"
#include "api/strategy_access.hpp"
#include "varsync/ext/testing.hpp"

using namespace vs_test;

namespace {

strategy make_three(std::vector<replica_fault> faults = {}) {
  strategy_options options;
  options.devices = {"cpu:0", "cpu:1", "cpu:2"};
  options.timeout = 5s;
  options.scheduler_threads = 2;
  auto s = varsync::testing::create_with_faults(options, std::move(faults));
  if (!s)
    FAIL("strategy::create failed: " << describe(s.error()));
  return std::move(*s);
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path()
          / ("varsync-survivors-" + std::to_string(::getpid()) + "-" + name))
    .string();
}

std::map<std::string, std::string> metadata_of(const std::string& path) {
  std::ifstream in{path, std::ios::binary};
  std::string bytes{std::istreambuf_iterator<char>{in}, {}};
  auto file = safetensors::decode(bytes);
  if (!file)
    FAIL("cannot decode " << path << ": " << describe(file.error()));
  return file->metadata;
}

} // namespace

TEST_CASE("survivors: after a replica failure save refuses, save_survivors "
          "stores what is known and restore is well-defined") {
  // Replica 1's operations: creates of w, f, c, n are 1-4; the assign is 5.
  auto s = make_three({fail_replica_at(1, 5, "device lost")});
  auto w = make_var(s, "w", tensor::scalar<float>(1), synchronization::on_write,
                    aggregation::sum);
  auto f = make_var(s, "f", tensor::scalar<float>(4), synchronization::on_read,
                    aggregation::only_first_replica);
  auto c = make_var(s, "c", tensor::scalar<float>(0), synchronization::on_read,
                    aggregation::sum);
  auto n = make_var(s, "n", tensor::scalar<int32_t>(7),
                    synchronization::none);
  VS_CHECK_CODE(s.assign(w, 6.0), replica_failed);
  auto path = temp_path("model.safetensors");
  std::filesystem::remove(path);

  // The plain save is unchanged: it refuses.
  VS_CHECK_CODE(save(s, path), replica_failed);
  CHECK_FALSE(std::filesystem::exists(path));
  // on_read + sum: the value is unknown; nothing is written.
  auto err = save_survivors(s, path);
  VS_CHECK_CODE(err, replica_failed);
  CHECK(message_of(err).find("'c'") != std::string::npos);
  CHECK(message_of(err).find("aggregate_survivors") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(path));

  // The rest is saved; the lost component of n is marked.
  VS_REQUIRE_OK(save_survivors(s, path, {"w", "f", "n"}));
  auto meta = metadata_of(path);
  CHECK(meta["missing_replicas"] == "1");
  CHECK(meta["n.missing_replicas"] == "1");
  CHECK(meta["n.replicas"] == "3");
  CHECK(meta.count("w.missing_replicas") == 0);

  auto fresh = make_three();
  auto w2 = make_var(fresh, "w", tensor::scalar<float>(0),
                     synchronization::on_write, aggregation::sum);
  auto f2 = make_var(fresh, "f", tensor::scalar<float>(0),
                     synchronization::on_read, aggregation::only_first_replica);
  make_var(fresh, "n", tensor::scalar<int32_t>(0), synchronization::none);
  auto before = take_snapshot(fresh);
  // A variable with a lost component is refused, naming it; nothing changes.
  err = restore(fresh, path);
  VS_CHECK_CODE(err, checkpoint_mismatch);
  CHECK(message_of(err).find("'n'") != std::string::npos);
  CHECK(same(before, take_snapshot(fresh)));
  // The others restore.
  VS_REQUIRE_OK(restore(fresh, path, {"w", "f"}));
  auto survivors = VS_VALUE(s.survivor_values(w));
  CHECK(read_scalar(fresh, w2) == survivors[0]->as_double(0));
  CHECK(read_scalar(fresh, f2) == 4);
  std::filesystem::remove(path);

  // Opting in: on_read + sum stores the sum of the survivors, marked so.
  SECTION("aggregate_survivors") {
    auto cs = VS_VALUE(s.survivor_values(c));
    double expected = cs[0]->as_double(0) + cs[2]->as_double(0);
    survivor_options options;
    options.aggregate_survivors = true;
    std::promise<caf::error> saved;
    save_survivors_async(s, path, {"c"}, options,
                         [&](caf::error e) { saved.set_value(std::move(e)); });
    VS_REQUIRE_OK(saved.get_future().get());
    auto m = metadata_of(path);
    CHECK(m["c.survivors_only"] == "true");
    CHECK(m["c.aggregated_replicas"] == "0,2");
    auto c2 = make_var(fresh, "c", tensor::scalar<float>(0),
                       synchronization::on_read, aggregation::sum);
    VS_REQUIRE_OK(restore(fresh, path, {"c"}));
    CHECK(read_scalar(fresh, c2) == expected);
    std::filesystem::remove(path);
  }
}

TEST_CASE("survivors: only_first_replica is lost with replica 0, on_write "
          "is saved from any live component") {
  // Replica 0's operations: creates of w and f are 1-2; the assign is 3.
  auto s = make_three({fail_replica_at(0, 3)});
  auto w = make_var(s, "w", tensor::scalar<float>(2), synchronization::on_write,
                    aggregation::mean);
  make_var(s, "f", tensor::scalar<float>(4), synchronization::on_read,
           aggregation::only_first_replica);
  VS_CHECK_CODE(s.assign(w, 3.0), replica_failed);
  auto path = temp_path("first.safetensors");
  auto err = save_survivors(s, path, {"f"});
  VS_CHECK_CODE(err, replica_failed);
  CHECK(message_of(err).find("replica 0") != std::string::npos);
  VS_REQUIRE_OK(save_survivors(s, path, {"w"}));
  auto fresh = make_three();
  auto w2 = make_var(fresh, "w", tensor::scalar<float>(0),
                     synchronization::on_write, aggregation::mean);
  VS_REQUIRE_OK(restore(fresh, path));
  auto survivors = VS_VALUE(s.survivor_values(w));
  CHECK(read_scalar(fresh, w2) == survivors[1]->as_double(0));
  std::filesystem::remove(path);
}

TEST_CASE("survivors: the checkpoint actor saves the survivors on request") {
  auto s = make_three({fail_replica_at(1, 3)});
  auto w = make_var(s, "w", tensor::scalar<float>(2), synchronization::on_write,
                    aggregation::sum);
  make_var(s, "c", tensor::scalar<float>(1), synchronization::on_read,
           aggregation::sum);
  VS_CHECK_CODE(s.assign(w, 3.0), replica_failed);
  auto path = temp_path("actor.safetensors");
  auto ckpt = spawn_checkpoint_actor(s);
  auto ask = [&](bool aggregate) {
    caf::scoped_actor self{
      varsync::detail::strategy_access::core(s)->system()};
    caf::error err;
    self->request(ckpt, 20s, checkpoint_save_survivors_atom::value, path,
                  std::vector<std::string>{}, aggregate)
      .receive([](ok_atom) {}, [&](caf::error& e) { err = std::move(e); });
    return err;
  };
  VS_CHECK_CODE(ask(false), replica_failed); // c's value is unknown
  VS_REQUIRE_OK(ask(true));
  auto meta = metadata_of(path);
  CHECK(meta["c.survivors_only"] == "true");
  CHECK(meta["missing_replicas"] == "1");
  caf::anon_send_exit(ckpt, caf::exit_reason::user_shutdown);
  std::filesystem::remove(path);
}

TEST_CASE("K6: value_of_survivors gives the value the live components stand "
          "for, per synchronization, and says why where none follows") {
  auto s = make_three();
  auto w = make_var(s, "w", tensor::scalar<float>(1), synchronization::on_write,
                    aggregation::sum);
  auto f = make_var(s, "f", tensor::scalar<float>(4), synchronization::on_read,
                    aggregation::only_first_replica);
  auto c = make_var(s, "c", tensor::scalar<float>(0), synchronization::on_read,
                    aggregation::mean);
  auto n = make_var(s, "n", tensor::scalar<int32_t>(7),
                    synchronization::none);
  using live_t = std::vector<std::optional<tensor>>;
  auto t = [](float x) { return std::optional<tensor>{tensor::scalar<float>(x)}; };
  const live_t lost_1{t(1), std::nullopt, t(3)};
  const live_t lost_0{std::nullopt, t(2), t(6)};
  const live_t none_left{std::nullopt, std::nullopt, std::nullopt};

  // on_write: any live component (they are equal, W7).
  auto any = value_of_survivors(w, lost_0, false);
  REQUIRE(any);
  CHECK(any->item<float>() == 2.0f);
  // only_first_replica: component 0, or replica_failed naming the rule.
  auto first = value_of_survivors(f, lost_1, false);
  REQUIRE(first);
  CHECK(first->item<float>() == 1.0f);
  auto lost_first = value_of_survivors(f, lost_0, true);
  VS_CHECK_CODE(lost_first.error(), replica_failed);
  CHECK_THAT(message_of(lost_first.error()),
             Catch::Matchers::Contains("'f'")
               && Catch::Matchers::Contains("replica 0, which is lost"));
  // mean: unknown unless aggregated; then the mean of the live ones.
  auto unknown = value_of_survivors(c, lost_0, false);
  VS_CHECK_CODE(unknown.error(), replica_failed);
  CHECK_THAT(message_of(unknown.error()), Catch::Matchers::Contains("'c'"));
  auto mean = value_of_survivors(c, lost_0, true);
  REQUIRE(mean);
  CHECK(mean->item<float>() == 4.0f);
  // Nothing left; no one value; nothing given.
  VS_CHECK_CODE(value_of_survivors(w, none_left, true).error(),
                replica_failed);
  VS_CHECK_CODE(value_of_survivors(n, lost_1, true).error(), invalid_argument);
  VS_CHECK_CODE(value_of_survivors(w, live_t{}, true).error(),
                invalid_argument);
  CHECK(is_per_component(n));
  CHECK_FALSE(is_per_component(c));
}

TEST_CASE("V9: weak_strategy: locks while a handle remains, not after the last "
          "went or after shutdown") {
  weak_strategy weak;
  CHECK_FALSE(weak.lock());
  {
    auto s = make_three().with_timeout(1234ms);
    weak = weak_strategy{s};
    auto locked = weak.lock();
    REQUIRE(locked);
    CHECK(locked->num_replicas() == 3);
    CHECK(locked->timeout() == 1234ms);
  }
  CHECK_FALSE(weak.lock()); // the last handle went: the strategy shut down
  auto s = make_three();
  weak_strategy other{s};
  s.shutdown();
  CHECK_FALSE(other.lock());
}
