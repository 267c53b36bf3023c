// M1-M6: what synchronization costs (varsync/ext/metrics.hpp), the advisor
// (varsync/ext/sync_advice.hpp), the stall warning and the HTTP endpoint.
// docs/semantics.md, docs/metrics.md.

#include "fixture.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <condition_variable>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <mutex>
#include <regex>
#include <thread>

#include <caf/actor_system.hpp>
#include <caf/scoped_actor.hpp>
#include <nlohmann/json.hpp>
#include <spdlog/sinks/ringbuffer_sink.h>

#include "api/strategy_access.hpp"
#include "core/logging.hpp"
#include "varsync/actor_api.hpp"
#include "varsync/ext/metrics_endpoint.hpp"
#include "varsync/ext/sync_advice.hpp"
#include "varsync/ext/testing.hpp"

using namespace vs_test;

namespace {

const variable_metrics& of(const strategy_metrics& m, const std::string& name) {
  for (auto& v : m.variables)
    if (v.name == name)
      return v;
  FAIL("no metrics for variable '" << name << "'");
  throw std::logic_error("unreachable");
}

/// The rank that holds replica `id` when `replicas` are split as the
/// fixture splits them over the strategy's processes.
int owner_of(const strategy& s, int replicas, int id) {
  const int p = s.num_processes();
  int first = 0;
  for (int r = 0; r < p; ++r) {
    const int local = replicas / p + (r < replicas % p ? 1 : 0);
    if (id < first + local)
      return r;
    first += local;
  }
  return -1;
}

bool holds(const strategy& s, int id) {
  return id >= s.first_local_replica()
         && id < s.first_local_replica() + s.num_local_replicas();
}

/// GET `path` from 127.0.0.1:`port`: the whole response.
std::string http(uint16_t port, const std::string& request_line) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr))
          == 0);
  auto req = request_line + "\r\nHost: localhost\r\n\r\n";
  REQUIRE(::send(fd, req.data(), req.size(), 0)
          == static_cast<ssize_t>(req.size()));
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = ::recv(fd, buf, sizeof(buf), 0)) > 0)
    out.append(buf, static_cast<size_t>(n));
  ::close(fd);
  return out;
}

} // namespace

TEST_CASE("M1: per variable, reads and updates are counted by context, with "
          "the steps, collectives and bytes of its synchronization") {
  auto s = make_strategy(3);
  const auto local = static_cast<uint64_t>(s.num_local_replicas());
  auto w = make_var(s, "w", tensor::from_vector<float>({4}, {0, 0, 0, 0}),
                    synchronization::on_write, aggregation::sum);
  auto r = make_var(s, "r", tensor::scalar<float>(0),
                    synchronization::on_read, aggregation::sum);
  auto n = make_var(s, "n", tensor::scalar<float>(0), synchronization::none,
                    aggregation::none);
  for (int step = 0; step < 3; ++step)
    VS_REQUIRE_OK(s.run([&](replica_context& ctx) {
      VS_VALUE_IN_STEP(ctx.read(w));
      VS_STEP_OK(ctx.assign_add(w, tensor::from_vector<float>(
                                     {4}, {1, 1, 1, 1})));
      VS_STEP_OK(ctx.assign_add(r, tensor::scalar<float>(1)));
    }));
  VS_VALUE(s.read(w));
  VS_VALUE(s.read(w));
  VS_REQUIRE_OK(s.assign(w, tensor::from_vector<float>({4}, {1, 2, 3, 4})));
  VS_VALUE(s.read(r));
  // NONE has no cross-replica value: the read fails, and is counted.
  VS_CHECK_CODE(error_of(s.read(n)), no_cross_replica_value);
  VS_VALUE(s.local_values(n));
  auto m = VS_VALUE(s.metrics());
  auto& mw = of(m, "w");
  CHECK(mw.sync == synchronization::on_write);
  CHECK(mw.agg == aggregation::sum);
  CHECK(mw.bytes == 16);
  CHECK(mw.replica_reads == 3 * local);
  CHECK(mw.replica_updates == 3 * local);
  CHECK(mw.cross_replica_reads == 2);
  CHECK(mw.cross_replica_updates == 1);
  CHECK(mw.steps_updated == 3);
  // One fused collective per step, reading one value per replica here.
  CHECK(mw.collectives == 3);
  CHECK(mw.bytes_moved == 3 * 16 * local);
  auto& mr = of(m, "r");
  CHECK(mr.replica_updates == 3 * local);
  CHECK(mr.replica_reads == 0);
  CHECK(mr.cross_replica_reads == 1);
  CHECK(mr.steps_updated == 0); // ON_READ updates stay local
  auto& mn = of(m, "n");
  CHECK(mn.cross_replica_reads == 2);
  CHECK(mn.cross_replica_updates == 0);
  // Sorted by name; the strategy's own counts.
  REQUIRE(m.variables.size() == 3);
  CHECK(m.variables[0].name == "n");
  CHECK(m.steps == 3);
  CHECK(m.collectives >= 3);
  CHECK(m.bytes_moved >= 3 * 16 * local);
  CHECK(m.replicas.size() == local);
  CHECK(m.process_rank == s.process_rank());
  CHECK(m.processes == s.num_processes());
  // A variable that does not exist is counted nowhere; a destroyed one is
  // gone from the snapshot.
  VS_REQUIRE_OK(s.destroy(n));
  auto after = VS_VALUE(s.metrics());
  CHECK(after.variables.size() == 2);
}

TEST_CASE("M2: the time in collectives and the wait for the slowest replica "
          "are measured unless collect_metrics is off, while counts stay") {
  for (bool collect : {true, false}) {
    INFO("collect_metrics " << collect);
    strategy_options options;
    options.collect_metrics = collect;
    auto s = make_strategy_with(2, options);
    auto w = make_var(s, "w", tensor::scalar<float>(0),
                      synchronization::on_write, aggregation::mean);
    for (int step = 0; step < 4; ++step)
      VS_REQUIRE_OK(s.run([&](replica_context& ctx) {
        if (ctx.replica_id() == 0)
          std::this_thread::sleep_for(30ms);
        VS_STEP_OK(ctx.assign_add(w, tensor::scalar<float>(1)));
      }));
    auto m = VS_VALUE(s.metrics());
    auto& mw = of(m, "w");
    CHECK(mw.steps_updated == 4);
    CHECK(mw.collectives == 4);
    if (collect) {
      CHECK(mw.collective_seconds > 0);
      CHECK(m.collective_seconds >= mw.collective_seconds);
      for (auto& rep : m.replicas)
        CHECK(rep.step_rounds == 4);
      if (s.num_local_replicas() == 2) {
        // Replica 0 slept 30 ms: it answered last (nearly always, on a
        // busy machine), the other waited.
        CHECK(mw.waiting_seconds >= 0.06);
        CHECK(m.replicas[0].slowest >= 2);
        CHECK(m.replicas[0].kept_waiting_seconds >= 0.03);
      }
    } else {
      CHECK(mw.collective_seconds == 0);
      CHECK(mw.waiting_seconds == 0);
      for (auto& rep : m.replicas)
        CHECK(rep.step_rounds == 0);
    }
  }
}

TEST_CASE("M3: per strategy, outcomes, refusals, deadlines and what is "
          "queued now", "[one-process]") {
  strategy_options options;
  options.max_queued_operations = 1;
  options.timeout = 5s;
  auto s = make_strategy_with(2, options);
  auto w = make_var(s, "w", tensor::scalar<float>(0),
                    synchronization::on_write, aggregation::sum);
  VS_CHECK_CODE(error_of(s.read(make_var(s, "x", tensor::scalar<float>(0),
                                         synchronization::none,
                                         aggregation::none))),
                no_cross_replica_value);
  // A step that holds replica 0: the call stays outstanding, the next is
  // refused at once (the bound is one call), and a snapshot still comes.
  std::promise<void> release;
  auto released = release.get_future().share();
  std::promise<caf::error> first_done;
  s.async().run(
    [released](replica_context& ctx) {
      if (ctx.replica_id() == 0)
        released.wait();
    },
    [&first_done](caf::error err) { first_done.set_value(std::move(err)); });
  std::promise<caf::error> refused;
  s.async().assign(w, tensor::scalar<float>(1),
                   [&refused](caf::error err) {
                     refused.set_value(std::move(err));
                   });
  VS_CHECK_CODE(refused.get_future().get(), overloaded);
  auto busy = VS_VALUE(s.metrics());
  CHECK(busy.outstanding_calls == 1);
  CHECK(busy.in_flight >= 1);
  CHECK(busy.refusals >= 1);
  // Replica 0 cannot answer while its step runs: its counts are stale.
  CHECK(busy.replicas[0].counts_stale);
  CHECK_FALSE(busy.replicas[1].counts_stale);
  release.set_value();
  VS_REQUIRE_OK(first_done.get_future().get());
  // A deadline hit: a step that outlives its call's deadline.
  auto quick = s.with_timeout(50ms);
  VS_CHECK_CODE(quick.run([](replica_context&) {
    std::this_thread::sleep_for(200ms);
  }),
                timeout);
  std::this_thread::sleep_for(250ms);
  auto m = VS_VALUE(s.metrics());
  CHECK(m.deadlines_hit >= 1);
  CHECK(m.errors >= 1);      // the read of a NONE variable
  CHECK(m.completed >= 3);   // two creations and a step at least
  CHECK(m.outstanding_calls == 0);
  CHECK(m.in_flight == 0);
  CHECK(m.queued_operations == 0);
  CHECK(m.steps == 2);
  CHECK(m.uptime_seconds > 0);
}

TEST_CASE("M3: operations that wait for admission are counted while they "
          "wait, with their bytes", "[one-process]") {
  auto s = make_strategy(2);
  constexpr int64_t width = 256; // 1 KiB of float32
  constexpr int behind = 100;
  auto w = make_var(s, "w", tensor::zeros(dtype::float32, {width}),
                    synchronization::on_write, aggregation::sum);
  // A step that holds replica 0, then updates behind it: some are admitted
  // (in flight), the rest wait for a slot.
  std::promise<void> release;
  auto released = release.get_future().share();
  std::promise<caf::error> step_done;
  s.async().run(
    [released](replica_context& ctx) {
      if (ctx.replica_id() == 0)
        released.wait();
    },
    [&step_done](caf::error err) { step_done.set_value(std::move(err)); });
  std::mutex m;
  std::condition_variable cv;
  int answered = 0;
  caf::error first;
  auto one = tensor::filled(dtype::float32, {width}, 1.0);
  for (int i = 0; i < behind; ++i)
    s.async().assign_add(w, one, [&](caf::error err) {
      std::lock_guard<std::mutex> lock{m};
      if (err && !first)
        first = err;
      ++answered;
      cv.notify_all();
    });
  auto busy = VS_VALUE(s.metrics());
  CHECK(busy.queued_operations > 0);
  CHECK(busy.in_flight > 0);
  CHECK(busy.in_flight + busy.queued_operations == behind + 1);
  CHECK(busy.queued_bytes >= busy.queued_operations * width * 4);
  release.set_value();
  VS_REQUIRE_OK(step_done.get_future().get());
  {
    std::unique_lock<std::mutex> lock{m};
    REQUIRE(cv.wait_for(lock, 20s, [&] { return answered == behind; }));
  }
  VS_REQUIRE_OK(first);
  auto idle = VS_VALUE(s.metrics());
  CHECK(idle.queued_operations == 0);
  CHECK(idle.queued_bytes == 0);
  CHECK(idle.in_flight == 0);
  CHECK(VS_VALUE(s.read(w)).to_vector<float>()
        == std::vector<float>(width, float(behind)));
}

TEST_CASE("M3: actors ask the coordinator for a snapshot (metrics_atom)",
          "[one-process]") {
  auto s = make_strategy(2);
  auto w = make_var(s, "w", tensor::scalar<float>(0),
                    synchronization::on_write, aggregation::sum);
  VS_VALUE(s.read(w));
  caf::scoped_actor self{
    varsync::detail::strategy_access::core(s)->system()};
  std::optional<strategy_metrics> got;
  self->request(coordinator_of(s), 5s, metrics_atom::value)
    .receive([&](strategy_metrics& m) { got = std::move(m); },
             [&](caf::error& err) { FAIL(describe(err)); });
  REQUIRE(got);
  CHECK(of(*got, "w").cross_replica_reads == 1);
}

TEST_CASE("M4: a replica that keeps the others waiting past the stall "
          "threshold is counted and named in a warning (across processes, "
          "the process that holds it)") {
  auto sink = std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(64);
  log()->sinks().push_back(sink);
  strategy_options options;
  options.stall_warning = 100ms;
  auto s = make_strategy_with(3, options);
  auto w = make_var(s, "w", tensor::scalar<float>(0),
                    synchronization::on_write, aggregation::sum);
  VS_REQUIRE_OK(s.run([&](replica_context& ctx) {
    if (ctx.replica_id() == 1)
      std::this_thread::sleep_for(400ms);
    VS_STEP_OK(ctx.assign_add(w, tensor::scalar<float>(1)));
  }));
  auto m = VS_VALUE(s.metrics());
  log()->sinks().pop_back();
  std::string logged;
  for (auto& line : sink->last_formatted())
    logged += line;
  INFO("log: " << logged);
  CHECK(m.stall_threshold_seconds == Approx(0.1));
  if (holds(s, 1) && s.num_local_replicas() > 1) {
    auto& slow = m.replicas[static_cast<size_t>(1 - s.first_local_replica())];
    CHECK(slow.stalls == 1);
    CHECK(slow.slowest == 1);
    CHECK(slow.kept_waiting_seconds >= 0.3);
    for (auto& rep : m.replicas)
      if (rep.replica != 1)
        CHECK(rep.stalls == 0);
    CHECK(logged.find("stall: replica 1 (") != std::string::npos);
    CHECK(logged.find("kept the other replicas waiting") != std::string::npos);
  }
  if (s.num_processes() > 1) {
    const int owner = owner_of(s, 3, 1);
    REQUIRE(m.process_rounds.size() == static_cast<size_t>(s.num_processes()));
    CHECK(m.process_rounds[static_cast<size_t>(owner)].stalls >= 1);
    CHECK(m.process_rounds[static_cast<size_t>(owner)].kept_waiting_seconds
          >= 0.3);
    for (auto& p : m.process_rounds)
      if (p.rank != owner)
        CHECK(p.stalls == 0);
    CHECK(logged.find("stall: process " + std::to_string(owner))
          != std::string::npos);
    if (s.process_rank() != owner)
      CHECK(m.waiting_for_processes_seconds >= 0.3);
  } else {
    CHECK(m.process_rounds.empty());
  }
}

TEST_CASE("M4: stall_warning 0 turns warnings off, a negative one is refused") {
  strategy_options options;
  options.stall_warning = -1ms;
  options.devices = {"cpu:0"};
  auto bad = strategy::create(options);
  REQUIRE_FALSE(bad);
  CHECK(has_code(bad.error(), errc::invalid_argument));
  options.stall_warning = 0ms;
  auto s = make_strategy_with(2, options);
  auto w = make_var(s, "w", tensor::scalar<float>(0),
                    synchronization::on_write, aggregation::sum);
  VS_REQUIRE_OK(s.run([&](replica_context& ctx) {
    if (ctx.replica_id() == 0)
      std::this_thread::sleep_for(50ms);
    VS_STEP_OK(ctx.assign_add(w, tensor::scalar<float>(1)));
  }));
  auto m = VS_VALUE(s.metrics());
  CHECK(m.stall_threshold_seconds == 0);
  for (auto& rep : m.replicas)
    CHECK(rep.stalls == 0);
}

TEST_CASE("M5: the advisor suggests a mode from the access pattern, with "
          "its figures") {
  auto s = make_strategy(2);
  auto rarely_read = make_var(s, "rarely_read", tensor::scalar<float>(0),
                              synchronization::on_write, aggregation::sum);
  auto read_always = make_var(s, "read_always", tensor::scalar<float>(0),
                              synchronization::on_read, aggregation::mean);
  auto none_read = make_var(s, "none_read", tensor::scalar<float>(0),
                            synchronization::none, aggregation::none);
  auto balanced = make_var(s, "balanced", tensor::scalar<float>(0),
                           synchronization::on_write, aggregation::mean);
  for (int step = 0; step < 25; ++step) {
    VS_REQUIRE_OK(s.run([&](replica_context& ctx) {
      VS_STEP_OK(ctx.assign_add(rarely_read, tensor::scalar<float>(1)));
      VS_STEP_OK(ctx.assign_add(read_always, tensor::scalar<float>(1)));
      VS_STEP_OK(ctx.assign_add(balanced, tensor::scalar<float>(1)));
      VS_VALUE_IN_STEP(ctx.read(balanced));
    }));
    VS_VALUE(s.read(read_always));
    VS_VALUE(s.local_values(none_read));
  }
  auto m = VS_VALUE(s.metrics());
  auto advice = advise(m);
  auto find = [&](const std::string& name) -> const sync_advice* {
    for (auto& a : advice)
      if (a.variable == name)
        return &a;
    return nullptr;
  };
  REQUIRE(find("rarely_read"));
  CHECK(find("rarely_read")->suggested == synchronization::on_read);
  CHECK(find("rarely_read")->agg == aggregation::sum);
  CHECK(find("rarely_read")->steps_updated == 25);
  CHECK(find("rarely_read")->reason.find("updated in 25 steps")
        != std::string::npos);
  // Trainable by default (C4): the advice says how to make the switch valid.
  CHECK(find("rarely_read")->reason.find("trainable = false")
        != std::string::npos);
  CHECK(of(m, "rarely_read").trainable);
  CHECK_FALSE(of(m, "read_always").trainable);
  REQUIRE(find("read_always"));
  CHECK(find("read_always")->suggested == synchronization::on_write);
  CHECK(find("read_always")->cross_replica_reads == 25);
  REQUIRE(find("none_read"));
  CHECK(find("none_read")->suggested == synchronization::on_read);
  CHECK(find("none_read")->agg == aggregation::sum);
  // Read in every step by every replica: nothing to suggest.
  CHECK(find("balanced") == nullptr);
  CHECK(advice.size() == 3);
  // Below min_observations nothing is judged.
  advisor_options strict;
  strict.min_observations = 1000;
  CHECK(advise(m, strict).empty());
  auto json = nlohmann::json::parse(to_json(advice));
  REQUIRE(json.is_array());
  CHECK(json.size() == 3);
  CHECK(json[0].contains("reason"));
}

TEST_CASE("M6: snapshots render as JSON and in the Prometheus text format") {
  auto s = make_strategy(2);
  auto w = make_var(s, "odd \"name\"\\x", tensor::scalar<float>(0),
                    synchronization::on_write, aggregation::sum);
  VS_REQUIRE_OK(s.run([&](replica_context& ctx) {
    VS_STEP_OK(ctx.assign_add(w, tensor::scalar<float>(1)));
  }));
  auto m = VS_VALUE(s.metrics());
  auto json = nlohmann::json::parse(to_json(m));
  CHECK(json["steps"] == 1);
  CHECK(json["variables"][0]["name"] == "odd \"name\"\\x");
  CHECK(json["variables"][0]["steps_updated"] == 1);
  CHECK(json["replicas"].size() == m.replicas.size());
  auto text = to_prometheus(m);
  // Every line: a comment, or name{labels} value.
  std::regex sample{R"(^varsync_[a-z_]+(\{([a-z_]+="([^"\\]|\\.)*",?)*\})? [-+0-9.eEInfNa]+$)"};
  std::istringstream lines{text};
  std::string line;
  size_t samples = 0;
  while (std::getline(lines, line)) {
    if (line.rfind("# HELP varsync_", 0) == 0
        || line.rfind("# TYPE varsync_", 0) == 0)
      continue;
    INFO(line);
    CHECK(std::regex_match(line, sample));
    ++samples;
  }
  CHECK(samples > 20);
  CHECK(text.find("varsync_steps_total{process=\"" + std::to_string(
                    s.process_rank()) + "\"} 1\n")
        != std::string::npos);
  CHECK(text.find("variable=\"odd \\\"name\\\"\\\\x\"") != std::string::npos);
  CHECK(text.find("# TYPE varsync_variable_reads_total counter")
        != std::string::npos);
}

TEST_CASE("M6: the HTTP endpoint serves a strategy's metrics on loopback "
          "until it stops",
          "[one-process]") {
  auto s = make_strategy(2);
  auto w = make_var(s, "w", tensor::scalar<float>(0),
                    synchronization::on_write, aggregation::sum);
  VS_VALUE(s.read(w));
  auto endpoint = metrics_endpoint::serve(s);
  REQUIRE(endpoint);
  const auto port = endpoint->port();
  REQUIRE(port != 0);
  CHECK(endpoint->url() == "http://127.0.0.1:" + std::to_string(port));
  auto text = http(port, "GET /metrics HTTP/1.0");
  CHECK(text.rfind("HTTP/1.0 200 OK\r\n", 0) == 0);
  CHECK(text.find("Content-Type: text/plain; version=0.0.4")
        != std::string::npos);
  CHECK(text.find("varsync_variable_reads_total{") != std::string::npos);
  auto json = http(port, "GET /metrics.json HTTP/1.1");
  auto body = json.substr(json.find("\r\n\r\n") + 4);
  CHECK(nlohmann::json::parse(body)["variables"][0]["name"] == "w");
  auto advice = http(port, "GET /advice HTTP/1.0");
  CHECK(advice.find("200 OK") != std::string::npos);
  CHECK(http(port, "GET /nope HTTP/1.0").rfind("HTTP/1.0 404", 0) == 0);
  CHECK(http(port, "POST /metrics HTTP/1.0").rfind("HTTP/1.0 405", 0) == 0);
  // The port is taken: a second endpoint on it is refused, naming the
  // port, and the first goes on serving.
  auto clash = metrics_endpoint::serve(s, port);
  REQUIRE_FALSE(clash);
  CHECK(has_code(clash.error(), errc::invalid_argument));
  CHECK(message_of(clash.error()).find("127.0.0.1:" + std::to_string(port))
        != std::string::npos);
  CHECK(http(port, "GET /metrics HTTP/1.0").rfind("HTTP/1.0 200", 0) == 0);
  // Moved: the new owner serves, the old one holds nothing.
  auto moved = std::move(*endpoint);
  CHECK(endpoint->port() == 0);
  endpoint->stop();
  CHECK(moved.port() == port);
  CHECK(http(port, "GET /metrics HTTP/1.0").rfind("HTTP/1.0 200", 0) == 0);
  // A strategy shut down has no snapshot to give: 503 until stopped.
  s.shutdown();
  CHECK(http(port, "GET /metrics HTTP/1.0").rfind("HTTP/1.0 503", 0) == 0);
  // Stopped: the port is free again.
  moved.stop();
  moved.stop();
  auto other = make_strategy(1);
  auto again = metrics_endpoint::serve(other, port);
  REQUIRE(again);
  CHECK(http(port, "GET /metrics HTTP/1.0").rfind("HTTP/1.0 200", 0) == 0);
  // It does not keep its strategy alive (V9): when the last handle goes,
  // the strategy shuts down and the endpoint answers 503.
  weak_strategy weak{other};
  other = make_strategy(1);
  CHECK_FALSE(weak.lock());
  CHECK(http(port, "GET /metrics HTTP/1.0").rfind("HTTP/1.0 503", 0) == 0);
}


namespace {

const operation_record* find_record(const strategy_description& d,
                                    const std::string& kind,
                                    const std::string& variable) {
  for (auto& r : d.recent_operations)
    if (r.kind == kind && r.variable == variable)
      return &r;
  return nullptr;
}

} // namespace

TEST_CASE("M7: the flight recorder holds the last operations, in order, "
          "with their phase, timings and errors",
          "[one-process]") {
  // In one process only where asked for (across processes: always).
  auto off = make_strategy(1);
  make_var(off, "x", tensor::scalar<float>(1), synchronization::on_write,
           aggregation::sum);
  auto none = VS_VALUE(off.stats());
  CHECK(none.recent_operations.empty());
  CHECK(none.operations_dispatched == 0);
  strategy_options with;
  with.flight_recorder = true;
  auto s = make_strategy_with(2, with);
  auto w = make_var(s, "w", tensor::scalar<float>(1),
                    synchronization::on_write, aggregation::sum);
  VS_REQUIRE_OK(s.assign(w, tensor::scalar<float>(2)));
  VS_VALUE(s.read(w));
  // A refused update: recorded as failed, with its error.
  VS_CHECK_CODE(s.assign(w, tensor::scalar<int32_t>(3)), dtype_mismatch);
  VS_CHECK_CODE(error_of(s.lookup("nope")), unknown_variable);
  auto d = VS_VALUE(s.stats());
  CHECK(d.process_rank == 0);
  REQUIRE(d.recent_operations.size() == 5);
  CHECK(d.operations_dispatched == 5);
  const std::vector<std::string> kinds{"create", "update", "read", "update",
                                       "lookup"};
  for (size_t i = 0; i < kinds.size(); ++i) {
    auto& r = d.recent_operations[i];
    CHECK(r.id == i + 1);
    CHECK(r.kind == kinds[i]);
    CHECK(r.origin == 0);
    CHECK(r.sequence == 0);
    CHECK(r.duration_us >= 0);
    CHECK(r.age_us >= r.duration_us);
  }
  CHECK(d.recent_operations[1].variable == "w");
  CHECK(d.recent_operations[1].phase == "done");
  CHECK(d.recent_operations[1].error.empty());
  CHECK(d.recent_operations[3].phase == "failed");
  CHECK(d.recent_operations[3].error.find("dtype_mismatch")
        != std::string::npos);
  CHECK(d.recent_operations[4].variable == "nope");
  CHECK(d.recent_operations[4].phase == "failed");
  // Reports are not recorded: asking again adds nothing.
  VS_VALUE(s.metrics());
  CHECK(VS_VALUE(s.stats()).operations_dispatched == 5);
  // The ring keeps the last 256, ids consecutive up to the count.
  for (int i = 0; i < 300; ++i)
    VS_VALUE(s.read(w));
  d = VS_VALUE(s.stats());
  REQUIRE(d.recent_operations.size() == 256);
  CHECK(d.operations_dispatched == 305);
  CHECK(d.recent_operations.front().id == 50);
  CHECK(d.recent_operations.back().id == 305);
  // A destroyed variable is named by its id.
  VS_REQUIRE_OK(s.destroy(w));
  d = VS_VALUE(s.stats());
  CHECK(d.recent_operations.back().kind == "destroy");
  CHECK(d.recent_operations.back().variable.rfind("#", 0) == 0);
  auto json = nlohmann::json::parse(to_json(d));
  CHECK(json["process"] == 0);
  CHECK(json["dispatched"] == 306);
  CHECK(json["operations"].size() == 256);
  CHECK(json["operations"].back()["kind"] == "destroy");
}

TEST_CASE("M7: an operation that hangs shows as running, and the report "
          "answers while it does, also over the metrics endpoint",
          "[one-process]") {
  // Replica 1 answers its operations from the second on 1.5 s late
  // (without blocking a thread): an assign hangs that long.
  strategy_options options;
  options.devices = {"cpu:0", "cpu:1"};
  options.timeout = 10s;
  options.flight_recorder = true;
  auto made = varsync::testing::create_with_faults(
    options, {delay_replica(1, 1500ms, 2)});
  REQUIRE(made);
  auto s = std::move(*made);
  auto w = make_var(s, "w", tensor::scalar<float>(1),
                    synchronization::on_write, aggregation::sum);
  auto assign = std::async(std::launch::async, [s, w] {
    return s.assign(w, tensor::scalar<float>(2));
  });
  const operation_record* running = nullptr;
  strategy_description d;
  for (int i = 0; i < 100 && running == nullptr; ++i) {
    d = VS_VALUE(s.stats());
    running = find_record(d, "update", "w");
    if (running == nullptr)
      std::this_thread::sleep_for(5ms);
  }
  REQUIRE(running != nullptr);
  CHECK(running->phase == "running");
  CHECK(running->duration_us == -1);
  auto endpoint = metrics_endpoint::serve(s);
  REQUIRE(endpoint);
  auto text = http(endpoint->port(), "GET /flight HTTP/1.0");
  REQUIRE(text.rfind("HTTP/1.0 200 OK\r\n", 0) == 0);
  auto json = nlohmann::json::parse(text.substr(text.find("\r\n\r\n") + 4));
  CHECK(json["operations"].back()["kind"] == "update");
  CHECK(json["operations"].back()["variable"] == "w");
  CHECK(json["operations"].back()["phase"] == "running");
  VS_REQUIRE_OK(assign.get());
  d = VS_VALUE(s.stats());
  auto* done = find_record(d, "update", "w");
  REQUIRE(done != nullptr);
  CHECK(done->phase == "done");
  CHECK(done->duration_us >= 1000000);
}

namespace {

// A temporary directory, removed with what it holds.
struct temp_dir {
  std::string path;
  temp_dir() {
    char name[] = "/tmp/varsync-m8-XXXXXX";
    REQUIRE(::mkdtemp(name) != nullptr);
    path = name;
  }
  ~temp_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

// The dump at `file` once it exists (the coordinator writes it after the
// answer), within 10 s.
std::optional<nlohmann::json> await_dump(const std::string& file,
                                         int64_t newer_than = -1) {
  for (int i = 0; i < 1000; ++i) {
    std::ifstream in{file};
    if (in) {
      auto j = nlohmann::json::parse(in, nullptr, false);
      if (!j.is_discarded() && j.value("unix_ms", int64_t{0}) > newer_than)
        return j;
    }
    std::this_thread::sleep_for(10ms);
  }
  return std::nullopt;
}

} // namespace

TEST_CASE("M8: with a dump directory, a missed deadline, a failed replica "
          "and SIGUSR1 each write the flight recorder to "
          "flight.<rank>.<reason>.json",
          "[one-process]") {
  temp_dir dir;
  strategy_options options;
  options.devices = {"cpu:0", "cpu:1"};
  options.timeout = 200ms;
  options.flight_dump_dir = dir.path;
  // Replica 1 fails at its 4th operation.
  auto made = varsync::testing::create_with_faults(
    options, {fail_replica_at(1, 4, "m8 fault")});
  REQUIRE(made);
  auto s = std::move(*made);
  auto w = make_var(s, "w", tensor::scalar<float>(1),
                    synchronization::on_write, aggregation::sum);
  // A deadline: waiting for a variable nobody creates.
  VS_CHECK_CODE(error_of(s.wait_for_variable("never")), timeout);
  auto timeout = await_dump(dir.path + "/flight.0.timeout.json");
  REQUIRE(timeout);
  CHECK((*timeout)["reason"] == "timeout");
  CHECK((*timeout)["detail"].get<std::string>().find("timeout")
        != std::string::npos);
  CHECK((*timeout)["pid"] == ::getpid());
  CHECK((*timeout)["process"] == 0);
  auto& last = (*timeout)["operations"].back();
  CHECK(last["kind"] == "wait_for");
  CHECK(last["variable"] == "never");
  CHECK(last["phase"] == "failed");
  // A second one at once is not written again within a second.
  const auto first = (*timeout)["unix_ms"].get<int64_t>();
  VS_CHECK_CODE(error_of(s.wait_for_variable("never")), timeout);
  std::this_thread::sleep_for(300ms);
  auto again = await_dump(dir.path + "/flight.0.timeout.json");
  REQUIRE(again);
  const auto second = (*again)["unix_ms"].get<int64_t>();
  CHECK((second == first || second - first >= 1000));
  // A failure: the replica's fault fails an operation with replica_failed.
  caf::error failed;
  for (int i = 0; i < 5 && !failed; ++i)
    failed = s.assign(w, tensor::scalar<float>(2));
  REQUIRE(has_code(failed, errc::replica_failed));
  auto failure = await_dump(dir.path + "/flight.0.failure.json");
  REQUIRE(failure);
  CHECK((*failure)["reason"] == "failure");
  INFO((*failure)["detail"].get<std::string>());
  CHECK((*failure)["detail"].get<std::string>().find("replica_failed")
        != std::string::npos);
  CHECK((*failure)["operations"].back()["phase"] == "failed");
  // SIGUSR1: every strategy with a dump directory writes, whatever it does.
  REQUIRE(std::raise(SIGUSR1) == 0);
  auto signal = await_dump(dir.path + "/flight.0.signal.json");
  REQUIRE(signal);
  CHECK((*signal)["reason"] == "signal");
  CHECK((*signal)["detail"] == "SIGUSR1");
  CHECK((*signal)["dispatched"].get<uint64_t>() >= 4);
  // No partial file stays behind.
  for (auto& e : std::filesystem::directory_iterator{dir.path})
    CHECK(e.path().extension() == ".json");
}

TEST_CASE("M8: a dump directory that is not a writable directory is refused "
          "when the strategy starts, naming it, also from "
          "VARSYNC_FLIGHT_DIR",
          "[one-process][bad-input]") {
  temp_dir dir;
  const auto file = dir.path + "/a-file";
  std::ofstream{file} << "x";
  for (const auto& bad : {std::string{"/nonexistent/varsync"}, file}) {
    strategy_options options;
    options.devices = {"cpu:0"};
    options.flight_dump_dir = bad;
    auto s = strategy::create(options);
    REQUIRE_FALSE(s);
    CHECK(has_code(s.error(), errc::invalid_argument));
    CHECK(message_of(s.error()).find(bad) != std::string::npos);
  }
  REQUIRE(::setenv("VARSYNC_FLIGHT_DIR", file.c_str(), 1) == 0);
  strategy_options options;
  options.devices = {"cpu:0"};
  auto s = strategy::create(options);
  ::unsetenv("VARSYNC_FLIGHT_DIR");
  REQUIRE_FALSE(s);
  CHECK(message_of(s.error()).find("VARSYNC_FLIGHT_DIR") != std::string::npos);
  // From the environment, a good one turns the recorder on.
  REQUIRE(::setenv("VARSYNC_FLIGHT_DIR", dir.path.c_str(), 1) == 0);
  auto good = strategy::create(options);
  ::unsetenv("VARSYNC_FLIGHT_DIR");
  REQUIRE(good);
  make_var(*good, "v", tensor::scalar<float>(1), synchronization::on_write,
           aggregation::sum);
  CHECK(VS_VALUE(good->stats()).operations_dispatched == 1);
}

TEST_CASE("M9: in one process, metrics_of_processes is one snapshot, from "
          "the blocking, async and actor forms",
          "[one-process]") {
  auto s = make_strategy(2);
  make_var(s, "w", tensor::scalar<float>(1), synchronization::on_write,
           aggregation::sum);
  auto all = VS_VALUE(s.metrics_of_processes());
  REQUIRE(all.size() == 1);
  CHECK(all[0].process_rank == 0);
  CHECK(all[0].processes == 1);
  CHECK(all[0].replicas.size() == 2);
  CHECK(all[0].completed >= 1);
  std::promise<caf::expected<std::vector<strategy_metrics>>> async_all;
  s.async().metrics_of_processes(
    [&](caf::expected<std::vector<strategy_metrics>> r) {
      async_all.set_value(std::move(r));
    });
  auto second = async_all.get_future().get();
  REQUIRE(second);
  REQUIRE(second->size() == 1);
  CHECK((*second)[0].completed > all[0].completed);
  caf::scoped_actor self{
    varsync::detail::strategy_access::core(s)->system()};
  std::vector<strategy_metrics> from_actor;
  self->request(coordinator_of(s), 5s, process_metrics_atom::value)
    .receive([&](std::vector<strategy_metrics>& r) { from_actor = r; },
             [&](caf::error& err) { FAIL(describe(err)); });
  REQUIRE(from_actor.size() == 1);
  CHECK(from_actor[0].replicas.size() == 2);
}

TEST_CASE("M7: operations that wait for admission show as queued, keep "
          "their number when they run, and end done",
          "[one-process]") {
  // Replica 1 answers from its second operation on 600 ms late: the first
  // 64 assigns (the admission limit) hold every slot, the rest queue.
  strategy_options options;
  options.devices = {"cpu:0", "cpu:1"};
  options.timeout = 20s;
  options.flight_recorder = true;
  auto made = varsync::testing::create_with_faults(
    options, {delay_replica(1, 600ms, 2)});
  REQUIRE(made);
  auto s = std::move(*made);
  auto w = make_var(s, "w", tensor::scalar<float>(1),
                    synchronization::on_write, aggregation::sum);
  constexpr int calls = 70;
  std::atomic<int> answered{0};
  std::atomic<int> failed{0};
  for (int i = 0; i < calls; ++i)
    s.async().assign(w, 2.0, [&](caf::error err) {
      if (err)
        ++failed;
      ++answered;
    });
  auto count = [](const strategy_description& d, const std::string& phase) {
    return std::count_if(d.recent_operations.begin(),
                         d.recent_operations.end(),
                         [&](const operation_record& r) {
                           return r.kind == "update" && r.phase == phase;
                         });
  };
  strategy_description d;
  for (int i = 0; i < 200 && count(d, "queued") == 0; ++i) {
    d = VS_VALUE(s.stats());
    if (count(d, "queued") == 0)
      std::this_thread::sleep_for(2ms);
  }
  CHECK(count(d, "queued") > 0);
  CHECK(count(d, "queued") + count(d, "running") + count(d, "done")
        == calls);
  for (int i = 0; i < 1000 && answered < calls; ++i)
    std::this_thread::sleep_for(10ms);
  REQUIRE(answered == calls);
  CHECK(failed == 0);
  d = VS_VALUE(s.stats());
  // One entry each, numbered in issue order after the create.
  CHECK(count(d, "done") == calls);
  CHECK(d.operations_dispatched == calls + 1);
}
