// Row 2b, the control plane under load: K event-based callers (1, 4, 16),
// each with one cross-replica scalar assign in flight at a time through the
// actor API, on one ON_WRITE variable of a strategy with 2 and 4 host
// replicas. Figure: assigns completed per second over a fixed interval, all
// callers together. Reference, measured in the same run just before: K
// callers with one request each in flight to one bare CAF actor that
// answers at once. Several rounds; the report takes the median rate.
//
// The coordinator's hop, measured: the same callers against a bare CAF
// relay that does what the group commit does and nothing else (no
// variable, no validation, no deadlines): each value goes to every one of
// N bare replica actors, one batch in flight at a time (W8's order), the
// values that arrive meanwhile leave together when it is confirmed, a lone
// value leaves at once when the relay's mailbox is empty, and the answers
// of a batch are spread over the scheduler threads.
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
#include <caf/atom.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/response_promise.hpp>
#include <caf/stateful_actor.hpp>

#include "bench/caf_setup.hpp"
#include "bench/host_strategy.hpp"
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

struct relay_state {
  std::vector<caf::actor> replicas;
  std::vector<caf::response_promise> waiting; // the next batch's callers
  std::vector<float> next;                    // and their values
  std::vector<caf::response_promise> in_flight;
  int confirmed = 0;
  bool flush_queued = false;
};

using relay_flush_atom = caf::atom_constant<caf::atom("rflush")>;

caf::behavior bare_replica(caf::event_based_actor*) {
  auto last = std::make_shared<float>(0);
  return {[last](const std::vector<float>& batch) {
    for (auto x : batch) // applied in order, as a replica does
      *last = x;
    return caf::ok_atom::value;
  }};
}

caf::behavior bare_relay(caf::stateful_actor<relay_state>* self,
                         std::vector<caf::actor> replicas,
                         std::shared_ptr<std::atomic<uint64_t>> batches,
                         std::shared_ptr<std::atomic<uint64_t>> values) {
  self->state.replicas = std::move(replicas);
  auto flush = std::make_shared<std::function<void()>>();
  *flush = [self, flush, batches, values] {
    auto& st = self->state;
    st.in_flight.swap(st.waiting);
    auto batch = std::move(st.next);
    st.next.clear();
    st.confirmed = 0;
    batches->fetch_add(1, std::memory_order_relaxed);
    values->fetch_add(batch.size(), std::memory_order_relaxed);
    for (auto& r : st.replicas)
      self->request(r, caf::infinite, batch)
        .then([self, flush](caf::ok_atom) {
          auto& st = self->state;
          if (++st.confirmed < static_cast<int>(st.replicas.size()))
            return;
          {
            // As the coordinator does: woken callers go to every worker.
            auto* saved = self->context();
            if (st.in_flight.size() > 1)
              self->context(nullptr);
            for (auto& rp : st.in_flight)
              rp.deliver(1);
            self->context(saved);
          }
          st.in_flight.clear();
          if (!st.waiting.empty())
            (*flush)();
        });
  };
  return {
    [self, flush](float x) -> caf::result<int> {
      auto& st = self->state;
      auto rp = self->make_response_promise();
      st.waiting.push_back(rp);
      st.next.push_back(x);
      if (st.in_flight.empty()) {
        if (self->mailbox().empty())
          (*flush)();
        else if (!st.flush_queued) {
          st.flush_queued = true;
          self->send(self, relay_flush_atom::value);
        }
      }
      return rp;
    },
    [self, flush](relay_flush_atom) {
      auto& st = self->state;
      st.flush_queued = false;
      if (st.in_flight.empty() && !st.waiting.empty())
        (*flush)();
    },
  };
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
    auto s = bench::host_strategy(sys, replicas);
    if (!s)
      return 1;
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
    std::vector<caf::actor> bare_replicas;
    for (int r = 0; r < replicas; ++r)
      bare_replicas.push_back(sys.spawn(bare_replica));
    auto relay_batches = std::make_shared<std::atomic<uint64_t>>(0);
    auto relay_values = std::make_shared<std::atomic<uint64_t>>(0);
    auto relay = sys.spawn(bare_relay, bare_replicas, relay_batches,
                           relay_values);
    auto id = w->id();
    auto x = tensor::scalar<float>(1);
    std::printf("== %d host replicas ==\n", replicas);
    for (int callers : {1, 4, 16}) {
      std::vector<double> bare;
      std::vector<double> assign;
      std::vector<double> relayed;
      auto before = s->metrics();
      auto relay_batches0 = relay_batches->load();
      auto relay_values0 = relay_values->load();
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
        relayed.push_back(callers_rate(sys, callers, seconds,
                                       [&](auto* a, auto done) {
                                         a->request(relay, caf::infinite, 1.0f)
                                           .then([done](int) { done(); });
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
      auto f = median_of(relayed);
      auto relay_batches1 = relay_batches->load();
      double relay_group
        = relay_batches1 > relay_batches0
            ? static_cast<double>(relay_values->load() - relay_values0)
                / static_cast<double>(relay_batches1 - relay_batches0)
            : 0;
      std::printf("  %2d callers: assign %9.0f /s   bare request %9.0f /s   "
                  "ratio %.2f   mean group %.1f writes\n"
                  "              bare relay %9.0f /s (%.2f of the bare "
                  "request, mean batch %.1f)   assign / relay %.2f\n",
                  callers, v, b, v / b, group, f, f / b, relay_group, v / f);
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
      rec.record("concurrent.relay" + tag, f, "1/s",
                 {{"min", *std::min_element(relayed.begin(), relayed.end())},
                  {"max", *std::max_element(relayed.begin(), relayed.end())},
                  {"mean_batch", relay_group}});
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
