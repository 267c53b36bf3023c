// Row 2, control plane: cross-replica assign and read of a scalar on an
// ON_WRITE and an ON_READ (SUM) variable, with 1, 2, 4 and 8 host replicas,
// through the three ways into varsync:
//   actor    - an event-based actor requests the coordinator's typed interface
//   async    - the callback API from a plain thread (time until the callback)
//   blocking - the blocking strategy handle from a plain thread
// and, measured in the same process right before, the bare CAF references:
//   bare.blocking - scoped_actor request/receive round trip to one actor
//   bare.event    - event-based request/then to one actor
//   bare.fanout   - event-based fan-out to N actors and gather of N replies
//   bare.relay    - event-based request to a relay actor that fans out to N
//                   actors and answers once all replied: the coordinator's
//                   shape without varsync (the floor of the actor API's
//                   cross-replica calls)
//   bare.blocking_relay - bare.relay to 1 actor from a plain thread that
//                   sleeps until the relay wakes it, as a blocking call
//                   waits: with bare.relay.r1, the floor of the blocking
//                   API's ratio to the actor API (T2c)
// Median and p99 of sequential calls (one in flight). No timed assertions:
// bench/report.py compares and prints.
//
//   api_latency [--quick] [--json FILE] [calls per figure]

#include <cstdio>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/scoped_actor.hpp>

#include "bench/caf_setup.hpp"
#include "bench/host_strategy.hpp"
#include "bench/event_loop.hpp"
#include "bench/common.hpp"
#include "core/wake_flag.hpp"
#include "varsync/actor_api.hpp"
#include "varsync/varsync.hpp"

using namespace varsync;
using bench::clock_type;
using bench::stats;

namespace {

// Sequential async-API calls from this thread; the time is taken inside the
// callback (when the caller learns the result), the wait for the next issue
// is not counted.
template <class Issue>
stats async_loop(int n, int warmup, Issue issue) {
  std::vector<double> us;
  us.reserve(static_cast<size_t>(n));
  for (int i = 0; i < n + warmup; ++i) {
    std::promise<double> p;
    auto t0 = clock_type::now();
    issue([&p, t0] { p.set_value(bench::micros_since(t0)); });
    auto t = p.get_future().get();
    if (i >= warmup)
      us.push_back(t);
  }
  return bench::summarize(std::move(us));
}

// The blocking ON_WRITE read's shape without varsync: a plain thread sends
// to a relay actor, which requests one echo actor (the primary replica) and
// then sets the wake_flag the thread sleeps on, the way a blocking call waits
// for its outcome (api/strategy_calls.hpp).
class blocking_relay {
public:
  blocking_relay(caf::actor_system& sys, caf::actor echo) {
    relay_ = sys.spawn([echo](caf::event_based_actor* self) -> caf::behavior {
      return {[self, echo](uint64_t flag) {
        self->request(echo, caf::infinite, 1).then([flag](int) {
          reinterpret_cast<varsync::detail::wake_flag*>(flag)->set();
        });
      }};
    });
  }

  ~blocking_relay() {
    caf::anon_send_exit(relay_, caf::exit_reason::user_shutdown);
  }

  void operator()() {
    varsync::detail::wake_flag flag;
    caf::anon_send(relay_, reinterpret_cast<uint64_t>(&flag));
    flag.wait();
  }

private:
  caf::actor relay_;
};

void show(const std::string& what, const stats& s) {
  std::printf("  %-44s median %9.2f us   p99 %9.2f us\n", what.c_str(),
              s.median, s.p99);
  std::fflush(stdout);
}

} // namespace

int main(int argc, char** argv) {
  auto opt = bench::parse_options(argc, argv);
  int n = opt.quick ? 3000 : 20000;
  if (!opt.rest.empty())
    n = std::stoi(opt.rest[0]);
  int warmup = std::max(100, n / 10);
  bench::recorder rec{opt.json};
  std::printf("control plane: %d sequential calls per figure (+%d warm-up), "
              "%d scheduler threads\n",
              n, warmup, bench::scheduler_threads);

  for (int replicas : {1, 2, 4, 8}) {
    caf::actor_system_config cfg;
    bench::configure(cfg);
    caf::actor_system sys{cfg};
    auto s = bench::host_strategy(sys, replicas);
    if (!s)
      return 1;
    auto w = s->create_variable("w", tensor::scalar<float>(0),
                                synchronization::on_write, aggregation::sum);
    auto r = s->create_variable("r", tensor::scalar<float>(0),
                                synchronization::on_read, aggregation::sum);
    if (!w || !r) {
      std::fprintf(stderr, "cannot create the variables\n");
      return 1;
    }
    auto coordinator = coordinator_of(*s);
    auto tag = ".r" + std::to_string(replicas);
    std::printf("== %d host replica(s) ==\n", replicas);

    // Bare CAF references.
    auto echo_fn = [](caf::event_based_actor*) -> caf::behavior {
      return {[](int x) { return x; }};
    };
    auto echo = sys.spawn(echo_fn);
    std::vector<caf::actor> echoes;
    for (int k = 0; k < replicas; ++k)
      echoes.push_back(sys.spawn(echo_fn));
    stats bare_blocking;
    {
      caf::scoped_actor self{sys};
      bare_blocking = bench::time_calls_us(n, warmup, [&] {
        self->request(echo, caf::infinite, 1)
          .receive([](int) {}, [](caf::error&) {});
      });
    }
    auto bare_event = bench::event_based_loop(sys, n, warmup, [&](auto* a, auto done) {
      a->request(echo, caf::infinite, 1).then([done](int) { done(); });
    });
    auto bare_fanout = bench::event_based_loop(sys, n, warmup, [&](auto* a,
                                                            auto done) {
      auto pending = std::make_shared<int>(replicas);
      for (auto& e : echoes)
        a->request(e, caf::infinite, 1).then([pending, done](int) {
          if (--*pending == 0)
            done();
        });
    });
    auto relay = sys.spawn([echoes](caf::event_based_actor* self)
                             -> caf::behavior {
      return {[self, echoes](int x) {
        auto rp = self->make_response_promise();
        auto pending = std::make_shared<size_t>(echoes.size());
        for (auto& e : echoes)
          self->request(e, caf::infinite, x).then([rp, pending](int y) mutable {
            if (--*pending == 0)
              rp.deliver(y);
          });
        return rp;
      }};
    });
    auto bare_relay = bench::event_based_loop(sys, n, warmup, [&](auto* a, auto done) {
      a->request(relay, caf::infinite, 1).then([done](int) { done(); });
    });
    caf::anon_send_exit(relay, caf::exit_reason::user_shutdown);
    stats bare_blocking_relay;
    {
      blocking_relay bare{sys, echo};
      bare_blocking_relay = bench::time_calls_us(n, warmup, bare);
    }
    show("bare CAF scoped_actor round trip (1 actor)", bare_blocking);
    show("bare CAF event-based request (1 actor)", bare_event);
    show("bare CAF fan-out/gather (" + std::to_string(replicas) + " actors)",
         bare_fanout);
    rec.latency("control.bare.blocking" + tag, bare_blocking);
    rec.latency("control.bare.event" + tag, bare_event);
    show("bare CAF relay to " + std::to_string(replicas) + " actor(s)",
         bare_relay);
    rec.latency("control.bare.fanout" + tag, bare_fanout);
    rec.latency("control.bare.relay" + tag, bare_relay);
    show("bare CAF relay to 1 actor from a sleeping thread",
         bare_blocking_relay);
    rec.latency("control.bare.blocking_relay" + tag, bare_blocking_relay);

    struct target {
      const char* name; // on_write / on_read
      variable v;
    };
    auto x = tensor::scalar<float>(1);
    for (auto& [name, v] : {target{"on_write", *w}, target{"on_read", *r}}) {
      auto id = v.id();
      auto actor_assign = bench::event_based_loop(sys, n, warmup, [&](auto* a,
                                                               auto done) {
        a->request(coordinator, caf::infinite, update_atom::value, id,
                   update_op::assign, x)
          .then([done](ok_atom) { done(); });
      });
      auto actor_read = bench::event_based_loop(sys, n, warmup, [&](auto* a,
                                                             auto done) {
        a->request(coordinator, caf::infinite, read_atom::value, id)
          .then([done](const tensor&) { done(); });
      });
      auto as = s->async();
      auto async_assign = async_loop(n, warmup, [&](auto done) {
        as.assign(v, x, [done](caf::error) { done(); });
      });
      auto async_read = async_loop(n, warmup, [&](auto done) {
        as.read(v, [done](caf::expected<tensor>) { done(); });
      });
      auto blocking_assign = bench::time_calls_us(n, warmup, [&] {
        (void) s->assign(v, x);
      });
      auto blocking_read = bench::time_calls_us(n, warmup, [&] {
        (void) s->read(v);
      });
      std::string base = std::string{"control."} + name;
      show(std::string{"actor API:    "} + name + " scalar assign", actor_assign);
      show(std::string{"actor API:    "} + name + " scalar read", actor_read);
      show(std::string{"async API:    "} + name + " scalar assign", async_assign);
      show(std::string{"async API:    "} + name + " scalar read", async_read);
      show(std::string{"blocking API: "} + name + " scalar assign",
           blocking_assign);
      show(std::string{"blocking API: "} + name + " scalar read", blocking_read);
      rec.latency(base + ".assign.actor" + tag, actor_assign);
      rec.latency(base + ".read.actor" + tag, actor_read);
      rec.latency(base + ".assign.async" + tag, async_assign);
      rec.latency(base + ".read.async" + tag, async_read);
      rec.latency(base + ".assign.blocking" + tag, blocking_assign);
      rec.latency(base + ".read.blocking" + tag, blocking_read);
    }
    caf::anon_send_exit(echo, caf::exit_reason::user_shutdown);
    for (auto& e : echoes)
      caf::anon_send_exit(e, caf::exit_reason::user_shutdown);
    s->shutdown();
  }
}
