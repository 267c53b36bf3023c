// Reliability under load: 16 concurrent clients mix cross-replica updates,
// reads, local_values and replica steps over 100 variables of a strategy of 4
// host replicas, for a bounded time (5 s by default; VARSYNC_LOAD_SECONDS
// sets another, e.g. 30). Every client keeps an exact tally of what it added
// to each variable; at the end every counter must equal its tally (no lost
// update), every on_write variable must hold bitwise equal components (W7),
// no call may have failed, the test must finish within its bound (no
// deadlock: a watchdog aborts the process if it does not), and resident
// memory must stay flat after a warm-up of 1 s.
//
// Overload (V3): clients offer far more async updates than small bounds
// allow, for 2/5 of that time. Every call must be answered exactly once,
// either applied or refused with `overloaded` (on the calling thread, as
// strategy.hpp promises); every variable must count exactly the accepted
// calls (a refusal changes nothing); and a closed-loop phase afterwards must
// see no refusal at all (recovery).

#include "../semantics/fixture.hpp"

#include "varsync/ext/testing.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <memory>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#  define VS_LOAD_SANITIZED 1
#elif defined(__has_feature)
#  if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)      \
    || __has_feature(memory_sanitizer)
#    define VS_LOAD_SANITIZED 1
#  endif
#endif
#ifndef VS_LOAD_SANITIZED
#  define VS_LOAD_SANITIZED 0
#endif

using namespace vs_test;

namespace {

constexpr int replicas = 4;
constexpr int num_variables = 100;
constexpr int num_clients = 16;
constexpr int num_async_clients = 4; // the last 4 clients use async()
constexpr int max_in_flight = 8;     // per async client
constexpr int64_t float_elements = 4;

double load_seconds() {
  if (const char* text = std::getenv("VARSYNC_LOAD_SECONDS")) {
    char* end = nullptr;
    double x = std::strtod(text, &end);
    if (end != text && x > 0 && x < 24 * 3600)
      return x;
  }
  return 5.0;
}

/// Resident set size from /proc/self/statm (second field, in pages).
int64_t resident_bytes() {
  std::ifstream statm{"/proc/self/statm"};
  int64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * static_cast<int64_t>(::sysconf(_SC_PAGESIZE));
}

double mib(int64_t bytes) {
  return static_cast<double>(bytes) / (1024.0 * 1024.0);
}

enum class kind { on_write_counter, on_read_counter, float_mean };

struct slot {
  variable v;
  kind k = kind::on_write_counter;
  /// What the clients added, exactly (float_mean: added per element).
  std::atomic<int64_t> tally{0};
};

enum op_kind : int {
  op_assign_add,
  op_read,
  op_local_values,
  op_step,
  op_async_assign_add,
  op_async_read,
  op_async_local_values,
  op_async_step,
  op_kinds
};

const char* op_names[op_kinds] = {"assign_add",       "read",
                                  "local_values",     "step",
                                  "async assign_add", "async read",
                                  "async local_values", "async step"};

struct shared_state {
  std::vector<std::unique_ptr<slot>> slots;
  std::vector<size_t> counters;       // indices of counters (both kinds)
  std::vector<size_t> on_write;       // on_write counters
  std::vector<size_t> on_read;        // on_read counters
  std::vector<size_t> floats;         // float on_write mean variables
  std::atomic<int64_t> ops[op_kinds] = {};
  std::atomic<int64_t> failures{0};
  std::mutex failure_mutex;
  std::vector<std::string> first_failures;

  void fail(const std::string& what) {
    if (failures.fetch_add(1) < 20) {
      std::lock_guard<std::mutex> guard{failure_mutex};
      first_failures.push_back(what);
    }
  }
};

tensor ones_f32() {
  return tensor::filled(dtype::float32, {float_elements}, 1.0);
}

bool components_equal(const std::vector<tensor>& xs) {
  for (auto& x : xs)
    if (!x.bitwise_equal(xs.front()))
      return false;
  return true;
}

/// An async replica step: +1 from every replica to an on_write counter (sum:
/// +N) and to an on_read counter (local: +1 per replica, +N in total).
struct count_step final : replica_step {
  count_step(variable ow, variable orv) : ow(std::move(ow)), orv(std::move(orv)) {}
  void run(replica_context& ctx) override {
    auto one = tensor::scalar<int64_t>(1);
    VS_STEP_OK(ctx.assign_add(ow, one));
    VS_STEP_OK(ctx.assign_add(orv, one));
  }
  variable ow, orv;
};

void blocking_client(const strategy& s, shared_state& st, unsigned seed,
                     std::chrono::steady_clock::time_point deadline) {
  std::mt19937_64 rng{seed};
  auto pick = [&](const std::vector<size_t>& from) -> slot& {
    return *st.slots[from[rng() % from.size()]];
  };
  auto one = tensor::scalar<int64_t>(1);
  auto ones = ones_f32();
  while (std::chrono::steady_clock::now() < deadline) {
    auto dice = rng() % 100;
    if (dice < 35) {
      auto& c = pick(st.counters);
      auto err = dice % 2 == 0 ? s.assign_add(c.v, 1.0) : s.assign_add(c.v, one);
      if (err)
        st.fail("assign_add " + c.v.name() + ": " + describe(err));
      else
        c.tally += 1;
      ++st.ops[op_assign_add];
    } else if (dice < 38) {
      auto& f = pick(st.floats);
      if (auto err = s.assign_add(f.v, ones))
        st.fail("assign_add " + f.v.name() + ": " + describe(err));
      else
        f.tally += 1;
      ++st.ops[op_assign_add];
    } else if (dice < 55) {
      auto& x = *st.slots[rng() % st.slots.size()];
      auto r = s.read(x.v);
      if (!r)
        st.fail("read " + x.v.name() + ": " + describe(r.error()));
      else if (x.k != kind::float_mean && r->as_double(0) < 0)
        st.fail("read " + x.v.name() + ": negative count");
      ++st.ops[op_read];
    } else if (dice < 65) {
      auto& x = *st.slots[rng() % st.slots.size()];
      auto r = s.local_values(x.v);
      if (!r)
        st.fail("local_values " + x.v.name() + ": " + describe(r.error()));
      else if (r->size() != static_cast<size_t>(replicas))
        st.fail("local_values " + x.v.name() + ": wrong count");
      else if (x.k != kind::on_read_counter && !components_equal(*r))
        st.fail("local_values " + x.v.name()
                + ": components of an on_write variable differ (W8)");
      ++st.ops[op_local_values];
    } else {
      auto& a = pick(st.on_write);
      auto& b = pick(st.on_read);
      slot* f = dice % 2 == 0 ? &pick(st.floats) : nullptr;
      auto fv = f ? f->v : variable{};
      // By value: a step never refers to the client's stack.
      auto err = s.run([av = a.v, bv = b.v, fv, one, ones](replica_context& ctx) {
        // A zero-copy read of the local component, then the updates.
        auto before = VS_VALUE_IN_STEP(ctx.read(bv));
        if (before.size != 1)
          throw std::runtime_error("unexpected component size");
        VS_STEP_OK(ctx.assign_add(av, one));    // on_write sum: +N
        VS_STEP_OK(ctx.assign_add(bv, one));    // on_read: +1 here
        if (fv.valid())
          VS_STEP_OK(ctx.assign_add(fv, ones)); // on_write mean: +1
      });
      if (err) {
        st.fail("step: " + describe(err));
      } else {
        a.tally += replicas;
        b.tally += replicas;
        if (f)
          f->tally += 1;
      }
      ++st.ops[op_step];
    }
  }
}

void async_client(const strategy& s, shared_state& st, unsigned seed,
                  std::chrono::steady_clock::time_point deadline) {
  std::mt19937_64 rng{seed};
  auto pick = [&](const std::vector<size_t>& from) -> slot& {
    return *st.slots[from[rng() % from.size()]];
  };
  auto api = s.async();
  // Shared with the callbacks, which run on the coordinator's thread.
  auto in_flight = std::make_shared<std::atomic<int>>(0);
  auto finished = [in_flight] {
    in_flight->fetch_sub(1);
    in_flight->notify_all();
  };
  auto wait_below = [&](int limit) {
    for (int cur = in_flight->load(); cur > limit; cur = in_flight->load())
      in_flight->wait(cur);
  };
  auto one = tensor::scalar<int64_t>(1);
  while (std::chrono::steady_clock::now() < deadline) {
    wait_below(max_in_flight - 1);
    in_flight->fetch_add(1);
    auto dice = rng() % 100;
    if (dice < 45) {
      auto* c = &pick(st.counters);
      api.assign_add(c->v, one, [&st, c, finished](caf::error err) {
        if (err)
          st.fail("async assign_add " + c->v.name() + ": " + describe(err));
        else
          c->tally += 1;
        finished();
      });
      ++st.ops[op_async_assign_add];
    } else if (dice < 65) {
      auto* x = st.slots[rng() % st.slots.size()].get();
      api.read(x->v, [&st, x, finished](caf::expected<tensor> r) {
        if (!r)
          st.fail("async read " + x->v.name() + ": " + describe(r.error()));
        finished();
      });
      ++st.ops[op_async_read];
    } else if (dice < 80) {
      auto* x = &pick(st.on_write);
      api.local_values(x->v, [&st, x, finished](
                               caf::expected<std::vector<tensor>> r) {
        if (!r)
          st.fail("async local_values " + x->v.name() + ": "
                  + describe(r.error()));
        else if (!components_equal(*r))
          st.fail("async local_values " + x->v.name()
                  + ": components of an on_write variable differ (W8)");
        finished();
      });
      ++st.ops[op_async_local_values];
    } else {
      auto* a = &pick(st.on_write);
      auto* b = &pick(st.on_read);
      api.run(std::make_shared<count_step>(a->v, b->v),
              [&st, a, b, finished](caf::error err) {
                if (err) {
                  st.fail("async step: " + describe(err));
                } else {
                  a->tally += replicas;
                  b->tally += replicas;
                }
                finished();
              });
      ++st.ops[op_async_step];
    }
  }
  wait_below(0); // drain: every callback has run
}

/// A deadlock must fail the run, not hang it: aborts the process unless
/// destroyed within `limit`.
class watchdog {
public:
  explicit watchdog(std::chrono::milliseconds limit)
    : thread_{[this, limit] {
        std::unique_lock<std::mutex> lock{mtx_};
        if (!cv_.wait_for(lock, limit, [this] { return done_; })) {
          std::cerr << "load test: no progress within " << limit.count()
                    << " ms: deadlock suspected, aborting" << std::endl;
          std::abort();
        }
      }} {
  }
  ~watchdog() {
    {
      std::lock_guard<std::mutex> guard{mtx_};
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

private:
  std::mutex mtx_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_; // last: starts once the members above exist
};

} // namespace

TEST_CASE("load: 16 concurrent clients mixing reads, writes and replica steps "
          "over 100 variables") {
  const double seconds = load_seconds();
  const auto run_for = std::chrono::duration_cast<std::chrono::milliseconds>(
    std::chrono::duration<double>(seconds));
  const auto warm_up = std::min<std::chrono::milliseconds>(1000ms, run_for / 2);
  const auto slack = 60s; // for the final checks, start-up and slow machines

  watchdog guard{run_for + 2 * slack}; // a deadlock fails, not hangs

  const auto test_start = std::chrono::steady_clock::now();
  strategy_options options;
  options.devices.clear();
  for (int r = 0; r < replicas; ++r)
    options.devices.push_back("cpu:" + std::to_string(r));
  options.timeout = 30s;
  options.scheduler_threads
    = std::clamp<size_t>(std::thread::hardware_concurrency(), 2, 8);
  auto created = strategy::create(options);
  REQUIRE(created);
  auto s = std::move(*created);
  REQUIRE(s.num_replicas() == replicas);

  shared_state st;
  for (int i = 0; i < num_variables; ++i) {
    auto sl = std::make_unique<slot>();
    switch (i % 5) {
      case 0:
      case 1:
        sl->k = kind::on_write_counter;
        sl->v = make_var(s, "ow_" + std::to_string(i),
                         tensor::scalar<int64_t>(0), synchronization::on_write,
                         aggregation::sum);
        st.on_write.push_back(static_cast<size_t>(i));
        st.counters.push_back(static_cast<size_t>(i));
        break;
      case 2:
      case 3:
        sl->k = kind::on_read_counter;
        sl->v = make_var(s, "or_" + std::to_string(i),
                         tensor::scalar<int64_t>(0), synchronization::on_read,
                         aggregation::sum);
        st.on_read.push_back(static_cast<size_t>(i));
        st.counters.push_back(static_cast<size_t>(i));
        break;
      default:
        sl->k = kind::float_mean;
        sl->v = make_var(s, "fm_" + std::to_string(i),
                         tensor::zeros(dtype::float32, {float_elements}),
                         synchronization::on_write, aggregation::mean);
        st.floats.push_back(static_cast<size_t>(i));
        break;
    }
    st.slots.push_back(std::move(sl));
  }
  REQUIRE(st.on_write.size() == 40);
  REQUIRE(st.on_read.size() == 40);
  REQUIRE(st.floats.size() == 20);

  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + run_for;
  std::vector<std::thread> clients;
  for (int c = 0; c < num_clients; ++c) {
    auto seed = static_cast<unsigned>(1000 + c);
    if (c >= num_clients - num_async_clients)
      clients.emplace_back([&, seed] { async_client(s, st, seed, deadline); });
    else
      clients.emplace_back([&, seed] { blocking_client(s, st, seed, deadline); });
  }
  std::this_thread::sleep_for(warm_up);
  const auto rss_warm = resident_bytes();
  // Resident memory once a second while the clients run, for the report.
  std::vector<int64_t> rss_series{rss_warm};
  while (std::chrono::steady_clock::now() + 1s < deadline) {
    std::this_thread::sleep_for(1s);
    rss_series.push_back(resident_bytes());
  }
  for (auto& t : clients)
    t.join();
  const auto clients_done = std::chrono::steady_clock::now();
  const auto rss_end = resident_bytes();

  // -- figures ---------------------------------------------------------------
  int64_t total = 0;
  std::ostringstream figures;
  figures << "load: " << num_clients << " clients (" << num_async_clients
          << " async), " << replicas << " replicas, " << num_variables
          << " variables, " << seconds << " s requested, "
          << std::chrono::duration<double>(clients_done - start).count()
          << " s run\n";
  for (int k = 0; k < op_kinds; ++k) {
    total += st.ops[k].load();
    figures << "  " << op_names[k] << ": " << st.ops[k].load() << "\n";
  }
  figures << "  total ops: " << total << " ("
          << static_cast<int64_t>(
               static_cast<double>(total)
               / std::chrono::duration<double>(clients_done - start).count())
          << " ops/s), failures: " << st.failures.load() << "\n";
  figures << "  resident memory after " << warm_up.count()
          << " ms warm-up: " << mib(rss_warm) << " MiB, at the end: "
          << mib(rss_end) << " MiB, growth: " << mib(rss_end - rss_warm)
          << " MiB\n  resident memory each second after warm-up (MiB):";
  for (auto x : rss_series)
    figures << " " << static_cast<int64_t>(mib(x));
  std::cout << figures.str() << std::endl;
  for (auto& f : st.first_failures)
    std::cout << "  failure: " << f << std::endl;

  // -- checks ------------------------------------------------------------------
  CHECK(st.failures.load() == 0);
  CHECK(total > 0);
  for (int k = 0; k < op_kinds; ++k) {
    INFO("operation kind never ran: " << op_names[k]);
    CHECK(st.ops[k].load() > 0);
  }
  // Every counter equals its tally exactly; on_write components are bitwise
  // equal; on_read components add up to the tally.
  int64_t lost = 0;
  for (auto& sl : st.slots) {
    auto& v = sl->v;
    INFO("variable " << v.name() << ", tally " << sl->tally.load());
    auto values = VS_VALUE(s.local_values(v));
    REQUIRE(values.size() == static_cast<size_t>(replicas));
    auto value = VS_VALUE(s.read(v));
    switch (sl->k) {
      case kind::on_write_counter:
        CHECK(components_equal(values));
        CHECK(value.to_vector<int64_t>()[0] == sl->tally.load());
        break;
      case kind::on_read_counter: {
        int64_t sum = 0;
        for (auto& x : values)
          sum += x.to_vector<int64_t>()[0];
        CHECK(sum == sl->tally.load());
        CHECK(value.to_vector<int64_t>()[0] == sl->tally.load());
        break;
      }
      case kind::float_mean:
        CHECK(components_equal(values));
        // Small integers are exact in float32 (tallies stay far below 2^24).
        for (int64_t i = 0; i < float_elements; ++i)
          CHECK(value.as_double(i) == static_cast<double>(sl->tally.load()));
        break;
    }
    if (sl->k != kind::float_mean
        && value.to_vector<int64_t>()[0] != sl->tally.load())
      ++lost;
  }
  CHECK(lost == 0);
  // No deadlock: the run ended within its bound.
  auto elapsed = std::chrono::steady_clock::now() - test_start;
  CHECK(elapsed < run_for + slack);
  // Flat memory after warm-up.
  const int64_t bound = (VS_LOAD_SANITIZED ? 768 : 64) * 1024 * 1024;
  INFO("resident growth " << mib(rss_end - rss_warm) << " MiB, bound "
                          << mib(bound) << " MiB");
  CHECK(rss_end - rss_warm < bound);
  s.shutdown();
}

namespace {

constexpr int burst_clients = 4;
constexpr int burst_scalars = 8;
constexpr int burst_tensors = 4;
constexpr int64_t burst_tensor_elements = 16 * 1024; // 64 KiB of float32
constexpr size_t burst_max_ops = 64;
constexpr size_t burst_max_bytes = 8 * 64 * 1024; // eight tensor calls
constexpr int recovery_calls = 100;               // per client

struct burst_state {
  std::vector<variable> vars; // scalars first, then tensors
  /// Accepted calls per variable (each adds exactly 1).
  std::vector<std::atomic<int64_t>> accepted;
  std::atomic<int64_t> issued{0};
  std::atomic<int64_t> refused_scalar{0};
  std::atomic<int64_t> refused_tensor{0};
  std::atomic<int64_t> refused_elsewhere{0}; // not on the calling thread
  std::atomic<int64_t> duplicates{0};
  std::atomic<int64_t> other{0};
  std::mutex mtx;
  std::condition_variable cv;
  int64_t answered = 0; // guarded by mtx
  std::vector<std::string> first_failures;

  explicit burst_state(size_t n) : accepted(n) {
  }

  bool is_tensor(size_t i) const {
    return i >= static_cast<size_t>(burst_scalars);
  }

  void fail(const std::string& what) {
    std::lock_guard<std::mutex> guard{mtx};
    if (first_failures.size() < 20)
      first_failures.push_back(what);
  }

  void answer() {
    std::lock_guard<std::mutex> guard{mtx};
    ++answered;
    cv.notify_all();
  }

  /// False if some issued call is still unanswered at `deadline`.
  bool wait_answered(std::chrono::steady_clock::time_point deadline) {
    std::unique_lock<std::mutex> guard{mtx};
    return cv.wait_until(guard, deadline,
                         [this] { return answered >= issued.load(); });
  }
};

/// Fires async assign_adds without waiting until `until`.
void burst_client(const strategy& s, burst_state& st, unsigned seed,
                  std::chrono::steady_clock::time_point until) {
  std::mt19937_64 rng{seed};
  auto api = s.async();
  const auto one = tensor::scalar<int64_t>(1);
  const auto ones
    = tensor::filled(dtype::float32, {burst_tensor_elements}, 1.0);
  const auto me = std::this_thread::get_id();
  while (std::chrono::steady_clock::now() < until) {
    auto i = static_cast<size_t>(rng() % st.vars.size());
    // Per call: a duplicate answer must be seen, not merely counted twice.
    auto once = std::make_shared<std::atomic<bool>>(false);
    st.issued.fetch_add(1);
    api.assign_add(st.vars[i], st.is_tensor(i) ? ones : one,
                   [&st, i, me, once](caf::error err) {
                     if (once->exchange(true)) {
                       st.duplicates.fetch_add(1);
                       st.fail("a second answer for " + st.vars[i].name());
                       return; // not answered again
                     }
                     if (!err) {
                       st.accepted[i].fetch_add(1);
                     } else if (has_code(err, errc::overloaded)) {
                       (st.is_tensor(i) ? st.refused_tensor : st.refused_scalar)
                         .fetch_add(1);
                       if (std::this_thread::get_id() != me)
                         st.refused_elsewhere.fetch_add(1);
                     } else {
                       st.other.fetch_add(1);
                       st.fail("assign_add " + st.vars[i].name() + ": "
                               + describe(err));
                     }
                     st.answer();
                   });
  }
}

} // namespace

TEST_CASE("load: clients offering far more than the bounds allow get "
          "overloaded refusals, everything accepted is applied exactly, and "
          "the strategy recovers") {
  // 2 s of burst by default; VARSYNC_LOAD_SECONDS scales it.
  const auto burst_for = std::chrono::duration_cast<std::chrono::milliseconds>(
    std::chrono::duration<double>(load_seconds() * 0.4));
  const auto slack = 60s; // drain, recovery and checks on a slow machine
  watchdog guard{burst_for + 2 * slack};

  strategy_options options;
  options.timeout = 30s;
  options.max_queued_operations = burst_max_ops;
  options.max_queued_bytes = burst_max_bytes;
  // A slow replica: calls are served far slower than the clients offer them,
  // on any machine, so that refusals are certain.
  auto s = make_host_strategy(replicas, std::move(options),
                              {delay_replica(1, 1ms)});

  burst_state st{burst_scalars + burst_tensors};
  for (int i = 0; i < burst_scalars; ++i)
    st.vars.push_back(make_var(s, "scalar_" + std::to_string(i),
                               tensor::scalar<int64_t>(0),
                               synchronization::on_write, aggregation::sum));
  for (int i = 0; i < burst_tensors; ++i)
    st.vars.push_back(make_var(
      s, "tensor_" + std::to_string(i),
      tensor::zeros(dtype::float32, {burst_tensor_elements}),
      synchronization::on_write, aggregation::sum));

  // -- burst: open loop --------------------------------------------------------
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> clients;
  for (int c = 0; c < burst_clients; ++c)
    clients.emplace_back([&, c] {
      burst_client(s, st, static_cast<unsigned>(2000 + c), start + burst_for);
    });
  for (auto& t : clients)
    t.join();
  clients.clear();
  // Every accepted call is answered (a lost answer fails here, not later).
  bool drained = st.wait_answered(std::chrono::steady_clock::now() + slack);
  const auto burst_done = std::chrono::steady_clock::now();

  int64_t accepted = 0;
  for (auto& a : st.accepted)
    accepted += a.load();
  const int64_t refused = st.refused_scalar + st.refused_tensor;
  std::cout << "load (overload): " << burst_clients << " clients, "
            << replicas << " replicas, bounds " << burst_max_ops
            << " calls / " << burst_max_bytes << " bytes, "
            << std::chrono::duration<double>(burst_done - start).count()
            << " s burst and drain\n  issued: " << st.issued.load()
            << ", accepted: " << accepted << ", refused: " << refused
            << " (scalar " << st.refused_scalar.load() << ", tensor "
            << st.refused_tensor.load() << "), other errors: "
            << st.other.load() << ", duplicate answers: "
            << st.duplicates.load() << std::endl;
  for (auto& f : st.first_failures)
    std::cout << "  failure: " << f << std::endl;

  {
    std::lock_guard<std::mutex> guard{st.mtx};
    INFO("answered " << st.answered << " of " << st.issued.load());
    REQUIRE(drained);
  }
  CHECK(st.other == 0);
  CHECK(st.duplicates == 0);
  CHECK(accepted + refused == st.issued.load());
  // Refusals happened, to both kinds of call, and at once.
  CHECK(st.refused_scalar > 0);
  CHECK(st.refused_tensor > 0);
  CHECK(st.refused_elsewhere == 0);
  CHECK(accepted > 0);

  // -- recovery: closed loop, nothing refused ------------------------------------
  // Each client has one call outstanding at a time: 4 calls (at most 4
  // tensors, 256 KiB) stay within both bounds once the burst has drained.
  std::atomic<int64_t> recovery_failures{0};
  for (int c = 0; c < burst_clients; ++c)
    clients.emplace_back([&, c] {
      const auto ones
        = tensor::filled(dtype::float32, {burst_tensor_elements}, 1.0);
      for (int k = 0; k < recovery_calls; ++k) {
        auto i = static_cast<size_t>(c * recovery_calls + k) % st.vars.size();
        auto err = st.is_tensor(i) ? s.assign_add(st.vars[i], ones)
                                   : s.assign_add(st.vars[i], 1.0);
        if (err) {
          recovery_failures.fetch_add(1);
          st.fail("recovery assign_add " + st.vars[i].name() + ": "
                  + describe(err));
        } else {
          st.accepted[i].fetch_add(1);
        }
      }
    });
  for (auto& t : clients)
    t.join();
  for (auto& f : st.first_failures)
    std::cout << "  failure: " << f << std::endl;
  CHECK(recovery_failures == 0);

  // -- every variable counts exactly its accepted calls --------------------------
  for (size_t i = 0; i < st.vars.size(); ++i) {
    const auto& v = st.vars[i];
    const auto n = st.accepted[i].load();
    INFO("variable " << v.name() << ", accepted " << n);
    auto values = VS_VALUE(s.local_values(v));
    REQUIRE(values.size() == static_cast<size_t>(replicas));
    CHECK(components_equal(values));
    auto value = VS_VALUE(s.read(v));
    if (st.is_tensor(i)) {
      // Exact: the counts stay far below float32's 2^24.
      auto xs = value.to_vector<float>();
      REQUIRE(xs.size() == static_cast<size_t>(burst_tensor_elements));
      auto wrong = std::count_if(xs.begin(), xs.end(), [n](float x) {
        return static_cast<double>(x) != static_cast<double>(n);
      });
      CHECK(wrong == 0);
    } else {
      CHECK(value.to_vector<int64_t>()[0] == n);
    }
  }
  // Nothing answered twice after the drain either.
  {
    std::lock_guard<std::mutex> guard{st.mtx};
    CHECK(st.answered == st.issued.load());
  }
  CHECK(st.duplicates == 0);
  s.shutdown();
}
