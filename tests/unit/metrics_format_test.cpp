// M4-M6 without a strategy: who kept the processes waiting
// (sync/transport/process_rounds.hpp), the advisor's thresholds and the renderings of
// a snapshot made by hand.

#include <catch2/catch.hpp>

#include <chrono>

#include <nlohmann/json.hpp>

#include "sync/transport/process_rounds.hpp"
#include "varsync/ext/metrics.hpp"
#include "varsync/ext/sync_advice.hpp"

using namespace varsync;
using namespace std::chrono_literals;

TEST_CASE("M4: the process that took longest since the last round arrived "
          "last, and the gap to the next is its stall") {
  process_rounds rounds;
  rounds.configure(100ms);
  rounds.record({100000, 500000, 120000}, 0, 380ms, "step");
  auto peers = rounds.snapshot();
  REQUIRE(peers.size() == 3);
  CHECK(peers[1].slowest == 1);
  CHECK(peers[1].stalls == 1);
  CHECK(peers[1].kept_waiting_seconds == Approx(0.38));
  CHECK(peers[0].slowest == 0);
  CHECK(peers[2].stalls == 0);
  CHECK(rounds.waited_seconds() == Approx(0.38));
  // Below the threshold: the slowest is counted, no stall.
  rounds.record({50000, 10000, 0}, 0, 0ms, "read");
  peers = rounds.snapshot();
  CHECK(peers[0].slowest == 1);
  CHECK(peers[0].stalls == 0);
  CHECK(peers[0].kept_waiting_seconds == Approx(0.04));
  // One process: nothing to compare.
  process_rounds alone;
  alone.record({123}, 0, 0ms, "x");
  CHECK(alone.snapshot().empty());
  // busy_micros counts from the last round.
  CHECK(rounds.busy_micros() < 10'000'000u);
}

namespace {

variable_metrics var(std::string name, synchronization sync, aggregation agg) {
  variable_metrics v;
  v.name = std::move(name);
  v.sync = sync;
  v.agg = agg;
  return v;
}

} // namespace

TEST_CASE("M5: the advisor's thresholds") {
  strategy_metrics m;
  m.steps = 20;
  m.replicas.resize(2);
  auto w = var("w", synchronization::on_write, aggregation::none);
  w.steps_updated = 20;
  w.cross_replica_reads = 1;
  w.replica_reads = 2; // one per replica: 1 + 2 / 2 = 2 reads = 0.1 per step
  m.variables.push_back(w);
  auto advice = advise(m);
  REQUIRE(advice.size() == 1);
  CHECK(advice[0].suggested == synchronization::on_read);
  CHECK(advice[0].agg == aggregation::sum); // none has no cross-replica value
  m.variables[0].cross_replica_reads = 2;   // 3 reads: more than 0.1 per step
  CHECK(advise(m).empty());
  m.variables[0].cross_replica_reads = 0;
  m.variables[0].steps_updated = 19; // fewer than min_observations
  CHECK(advise(m).empty());

  m.variables = {var("r", synchronization::on_read, aggregation::mean)};
  m.variables[0].cross_replica_reads = 16; // 0.8 of 20 steps
  advice = advise(m);
  REQUIRE(advice.size() == 0); // 16 < min_observations
  advisor_options loose;
  loose.min_observations = 10;
  advice = advise(m, loose);
  REQUIRE(advice.size() == 1);
  CHECK(advice[0].suggested == synchronization::on_write);
  CHECK(advice[0].agg == aggregation::mean);
  m.variables[0].cross_replica_reads = 15;
  CHECK(advise(m, loose).empty());

  m.variables = {var("n", synchronization::none, aggregation::none)};
  m.variables[0].cross_replica_reads = 20;
  advice = advise(m);
  REQUIRE(advice.size() == 1);
  CHECK(advice[0].suggested == synchronization::on_read);
  CHECK(advice[0].reason.find("'n'") != std::string::npos);
}

TEST_CASE("M6: an empty snapshot renders, and numbers keep their precision") {
  strategy_metrics m;
  m.collective_seconds = 0.1;
  auto json = nlohmann::json::parse(to_json(m));
  CHECK(json["variables"].empty());
  CHECK(json["collective_seconds"].get<double>() == 0.1);
  auto text = to_prometheus(m);
  CHECK(text.find("varsync_collective_seconds_total{process=\"0\"} 0.1")
        != std::string::npos);
  CHECK(text.find("varsync_variable_") == std::string::npos);
  CHECK(text.find("varsync_replica_") == std::string::npos);
  CHECK(to_json(std::vector<sync_advice>{}) == "[]");
  // Names are bytes: invalid UTF-8 is replaced, never thrown about.
  m.variables.push_back(var("bad\xff\xfe", synchronization::none,
                            aggregation::none));
  std::string out;
  CHECK_NOTHROW(out = to_json(m));
  CHECK(nlohmann::json::parse(out)["variables"][0]["name"] == "bad\uFFFD\uFFFD");
}
