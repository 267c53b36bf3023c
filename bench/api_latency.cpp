// Control-plane latency of the three ways into varsync, against the bare CAF
// figures they are compared with, all measured in one run on this machine.
// Prints median and p99 per row and the ratio to its reference.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <future>
#include <string>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/scoped_actor.hpp>

#include "varsync/actor_api.hpp"
#include "varsync/varsync.hpp"

using namespace varsync;
using clock_type = std::chrono::steady_clock;

namespace {

struct figure {
  double median_us;
  double p99_us;
};

figure summarize(std::vector<double> us) {
  std::sort(us.begin(), us.end());
  return {us[us.size() / 2], us[us.size() * 99 / 100]};
}

figure time_calls(int n, const std::function<void()>& call) {
  for (int i = 0; i < n / 10; ++i)
    call(); // warm-up
  std::vector<double> us;
  us.reserve(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    auto t0 = clock_type::now();
    call();
    us.push_back(
      std::chrono::duration<double, std::micro>(clock_type::now() - t0).count());
  }
  return summarize(std::move(us));
}

void print_row(const std::string& what, figure f, const std::string& ref_name,
               figure ref) {
  std::printf("%-52s median %8.2f us  p99 %8.2f us | vs %-34s %8.2f us  ratio %5.2f\n",
              what.c_str(), f.median_us, f.p99_us, ref_name.c_str(),
              ref.median_us, f.median_us / ref.median_us);
}

// An event-based client that issues `n` sequential requests produced by
// `send` and records each round trip.
using requester = std::function<void(caf::event_based_actor*,
                                     std::function<void()>)>;

figure event_based_loop(caf::actor_system& sys, int n, requester send) {
  std::promise<std::vector<double>> result;
  auto fut = result.get_future();
  sys.spawn([&, n, send](caf::event_based_actor* self) {
    auto us = std::make_shared<std::vector<double>>();
    auto next = std::make_shared<std::function<void()>>();
    auto total = n + n / 10;
    *next = [self, us, next, send, total, &result]() {
      if (static_cast<int>(us->size()) == total) {
        result.set_value(*us);
        self->quit();
        return;
      }
      auto t0 = clock_type::now();
      send(self, [us, next, t0] {
        us->push_back(std::chrono::duration<double, std::micro>(
                        clock_type::now() - t0)
                        .count());
        (*next)();
      });
    };
    (*next)();
  });
  auto us = fut.get();
  us.erase(us.begin(), us.begin() + n / 10);
  return summarize(std::move(us));
}

} // namespace

int main(int argc, char** argv) {
  int n = argc > 1 ? std::stoi(argv[1]) : 20000;
  for (int replicas : {1, 2, 4, 8}) {
    caf::actor_system_config cfg;
    register_types(cfg);
    cfg.set("scheduler.max-threads", 2);
    cfg.set("logger.verbosity", caf::atom("quiet"));
    caf::actor_system sys{cfg};
    strategy_options options;
    options.devices.clear();
    for (int r = 0; r < replicas; ++r)
      options.devices.push_back("cpu:" + std::to_string(r));
    auto s = strategy::create(sys, options);
    if (!s) {
      std::fprintf(stderr, "%s\n", describe(s.error()).c_str());
      return 1;
    }
    auto w = s->create_variable("w", tensor::scalar<float>(0),
                                synchronization::on_write, aggregation::sum);
    auto r = s->create_variable("r", tensor::scalar<float>(0),
                                synchronization::on_read, aggregation::sum);
    auto coordinator = coordinator_of(*s);
    std::printf("== %d host replica(s), 2 scheduler threads ==\n", replicas);

    // Bare CAF references: scoped_actor round trip to one actor, event-based
    // request to one actor, event-based fan-out-and-gather to N actors.
    auto echo = sys.spawn([](caf::event_based_actor*) -> caf::behavior {
      return {[](int x) { return x; }};
    });
    std::vector<caf::actor> echoes;
    for (int k = 0; k < replicas; ++k)
      echoes.push_back(sys.spawn([](caf::event_based_actor*) -> caf::behavior {
        return {[](int x) { return x; }};
      }));
    caf::scoped_actor self{sys};
    auto bare_blocking = time_calls(n, [&] {
      self->request(echo, caf::infinite, 1).receive([](int) {},
                                                    [](caf::error&) {});
    });
    auto bare_event = event_based_loop(sys, n, [&](auto* a, auto done) {
      a->request(echo, caf::infinite, 1).then([done](int) { done(); });
    });
    auto bare_fanout = event_based_loop(sys, n, [&](auto* a, auto done) {
      auto pending = std::make_shared<int>(replicas);
      for (auto& e : echoes)
        a->request(e, caf::infinite, 1).then([pending, done](int) {
          if (--*pending == 0)
            done();
        });
    });
    std::printf("%-52s median %8.2f us  p99 %8.2f us\n",
                "bare CAF scoped_actor round trip (1 actor)",
                bare_blocking.median_us, bare_blocking.p99_us);
    std::printf("%-52s median %8.2f us  p99 %8.2f us\n",
                "bare CAF event-based request (1 actor)", bare_event.median_us,
                bare_event.p99_us);
    std::printf("%-52s median %8.2f us  p99 %8.2f us\n",
                ("bare CAF fan-out and gather (" + std::to_string(replicas)
                 + " actors)")
                  .c_str(),
                bare_fanout.median_us, bare_fanout.p99_us);

    auto x = tensor::scalar<float>(1);
    auto wid = w->id();
    auto rid = r->id();
    auto actor_assign = event_based_loop(sys, n, [&](auto* a, auto done) {
      a->request(coordinator, caf::infinite, update_atom::value, wid,
                 update_op::assign, x)
        .then([done](ok_atom) { done(); });
    });
    auto actor_read_w = event_based_loop(sys, n, [&](auto* a, auto done) {
      a->request(coordinator, caf::infinite, read_atom::value, wid)
        .then([done](tensor) { done(); });
    });
    auto actor_read_r = event_based_loop(sys, n, [&](auto* a, auto done) {
      a->request(coordinator, caf::infinite, read_atom::value, rid)
        .then([done](tensor) { done(); });
    });
    auto fanout_name = "bare fan-out/gather (" + std::to_string(replicas) + ")";
    print_row("actor API: on_write scalar assign", actor_assign, fanout_name,
              bare_fanout);
    print_row("actor API: on_write scalar read", actor_read_w,
              "bare event-based request", bare_event);
    print_row("actor API: on_read sum scalar read", actor_read_r, fanout_name,
              bare_fanout);

    auto async_assign = time_calls(n, [&] {
      std::promise<void> p;
      s->async().assign(*w, x, [&p](caf::error) { p.set_value(); });
      p.get_future().wait();
    });
    print_row("async API (callback): on_write scalar assign", async_assign,
              "bare scoped_actor round trip", bare_blocking);
    auto blocking_assign = time_calls(n, [&] { (void) s->assign(*w, x); });
    auto blocking_read_w = time_calls(n, [&] { (void) s->read(*w); });
    auto blocking_assign_r = time_calls(n, [&] { (void) s->assign(*r, x); });
    auto blocking_read_r = time_calls(n, [&] { (void) s->read(*r); });
    print_row("blocking API: on_write scalar assign", blocking_assign,
              "bare scoped_actor round trip", bare_blocking);
    print_row("blocking API: on_write scalar read", blocking_read_w,
              "bare scoped_actor round trip", bare_blocking);
    print_row("blocking API: on_read sum scalar assign", blocking_assign_r,
              "bare scoped_actor round trip", bare_blocking);
    print_row("blocking API: on_read sum scalar read", blocking_read_r,
              "bare scoped_actor round trip", bare_blocking);
    print_row("blocking API vs actor API: on_write assign", blocking_assign,
              "actor API on_write assign", actor_assign);
    self->send_exit(echo, caf::exit_reason::user_shutdown);
    for (auto& e : echoes)
      self->send_exit(e, caf::exit_reason::user_shutdown);
    s->shutdown();
  }
}
