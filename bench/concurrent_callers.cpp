// Row 2b, the control plane under load: K event-based callers (1, 4, 16),
// each with one cross-replica scalar assign in flight at a time through the
// actor API, on one ON_WRITE variable of a strategy with 2 and 4 host
// replicas. Figure: assigns completed per second over a fixed interval, all
// callers together. Reference, measured in the same run just before: K
// callers with one request each in flight to one bare CAF actor that
// answers at once. Several rounds; the report takes the median rate.
//
//   concurrent_callers [--quick] [--json FILE] [seconds per figure]

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>

#include "bench/caf_setup.hpp"
#include "bench/common.hpp"
#include "varsync/actor_api.hpp"
#include "varsync/varsync.hpp"

using namespace varsync;

namespace {

// One caller issues requests made by `send` one after the other until `stop`
// is set; `send(self, done)` calls done() when the reply arrives.
using requester = std::function<void(caf::event_based_actor*,
                                     std::function<void()>)>;

// K callers run for `seconds`; the rate counts the replies that arrived
// between the end of a short warm-up and the stop.
double callers_rate(caf::actor_system& sys, int callers, double seconds,
                    const requester& send) {
  auto counted = std::make_shared<std::atomic<bool>>(false);
  auto stop = std::make_shared<std::atomic<bool>>(false);
  auto completed = std::make_shared<std::atomic<uint64_t>>(0);
  std::vector<std::future<void>> finished;
  for (int k = 0; k < callers; ++k) {
    auto quit = std::make_shared<std::promise<void>>();
    finished.push_back(quit->get_future());
    sys.spawn([=](caf::event_based_actor* self) {
      auto next = std::make_shared<std::function<void()>>();
      auto* loop = next.get();
      self->attach_functor([next, quit](const caf::error&) {
        quit->set_value();
      });
      *next = [=] {
        if (stop->load(std::memory_order_relaxed)) {
          self->quit();
          return;
        }
        send(self, [=] {
          if (counted->load(std::memory_order_relaxed))
            completed->fetch_add(1, std::memory_order_relaxed);
          (*loop)();
        });
      };
      (*next)();
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  counted->store(true);
  auto t0 = bench::clock_type::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  auto done = completed->load();
  auto elapsed = bench::seconds_since(t0);
  stop->store(true);
  for (auto& f : finished)
    f.wait();
  return static_cast<double>(done) / elapsed;
}

double median_of(std::vector<double> xs) {
  std::sort(xs.begin(), xs.end());
  return xs[xs.size() / 2];
}

} // namespace

int main(int argc, char** argv) {
  auto opt = bench::parse_options(argc, argv);
  double seconds = opt.quick ? 0.2 : 0.5;
  if (!opt.rest.empty())
    seconds = std::stod(opt.rest[0]);
  const int rounds = opt.quick ? 3 : 5;
  bench::recorder rec{opt.json};
  std::printf("control plane under load: K callers, one request each in "
              "flight, %.2f s per figure, median of %d rounds, %d scheduler "
              "threads\n",
              seconds, rounds, bench::scheduler_threads);

  for (int replicas : {2, 4}) {
    caf::actor_system_config cfg;
    bench::configure(cfg);
    caf::actor_system sys{cfg};
    strategy_options options;
    options.devices = bench::host_devices(replicas);
    auto s = strategy::create(sys, options);
    if (!s) {
      std::fprintf(stderr, "%s\n", describe(s.error()).c_str());
      return 1;
    }
    auto w = s->create_variable("w", tensor::scalar<float>(0),
                                synchronization::on_write, aggregation::sum);
    if (!w) {
      std::fprintf(stderr, "cannot create the variable\n");
      return 1;
    }
    auto coordinator = coordinator_of(*s);
    auto echo = sys.spawn([](caf::event_based_actor*) -> caf::behavior {
      return {[](int x) { return x; }};
    });
    auto id = w->id();
    auto x = tensor::scalar<float>(1);
    std::printf("== %d host replicas ==\n", replicas);
    for (int callers : {1, 4, 16}) {
      std::vector<double> bare;
      std::vector<double> assign;
      auto before = s->metrics();
      for (int round = 0; round < rounds; ++round) {
        bare.push_back(callers_rate(sys, callers, seconds,
                                    [&](auto* a, auto done) {
                                      a->request(echo, caf::infinite, 1)
                                        .then([done](int) { done(); });
                                    }));
        assign.push_back(callers_rate(
          sys, callers, seconds, [&](auto* a, auto done) {
            a->request(coordinator, caf::infinite, update_atom::value, id,
                       update_op::assign, x)
              .then([done](ok_atom) { done(); },
                    [done](caf::error&) { done(); });
          }));
      }
      auto b = median_of(bare);
      auto v = median_of(assign);
      // How many writes left together (group commit), over the rounds.
      auto after = s->metrics();
      double group = 0;
      if (before && after && after->write_groups > before->write_groups)
        group = static_cast<double>(after->writes_sent - before->writes_sent)
                / static_cast<double>(after->write_groups
                                      - before->write_groups);
      std::printf("  %2d callers: assign %9.0f /s   bare request %9.0f /s   "
                  "ratio %.2f   mean group %.1f writes\n",
                  callers, v, b, v / b, group);
      std::fflush(stdout);
      auto tag = ".c" + std::to_string(callers) + ".r"
                 + std::to_string(replicas);
      rec.record("concurrent.bare" + tag, b, "1/s",
                 {{"min", *std::min_element(bare.begin(), bare.end())},
                  {"max", *std::max_element(bare.begin(), bare.end())}});
      rec.record("concurrent.assign" + tag, v, "1/s",
                 {{"min", *std::min_element(assign.begin(), assign.end())},
                  {"max", *std::max_element(assign.begin(), assign.end())},
                  {"mean_group", group}});
    }
    // Every assign went through: the variable holds 1 on every replica.
    auto values = s->local_values(*w);
    if (!values) {
      std::fprintf(stderr, "%s\n", describe(values.error()).c_str());
      return 1;
    }
  }
  return 0;
}
