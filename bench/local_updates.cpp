// Row 3, local updates: replica-context assign_add on an ON_READ (SUM)
// variable inside a replica step, which must stay on the replica (no message
// leaves it), against the bare CAF one-way message rate.
//
//   bare one-way   anon_send of ints from this thread to an event-based actor
//                  that counts them: messages per second
//   step, scalar   one step whose fn loops M times ctx.assign_add(v, 1.0):
//                  M / (wall time of the step) = updates/s per replica
//                  (replicas run concurrently on the 2 scheduler threads)
//   step, tensor   the same with ctx.assign_add(v, t), t a prebuilt scalar
//                  tensor
//   typed          an event-based actor bound to replica 0 sends
//                  local_update_atom requests to it (replica_of), 64 in
//                  flight: updates/s
//   messages       messages received by the coordinator, by the replicas and
//                  by all actors during one step with M = 1 and with
//                  M = 1,000,000, counted by interposing CAF's
//                  scheduled_actor::enqueue (message_counter.hpp), and the
//                  strategy's collectives_run before/after.
//
//   local_updates [--quick] [--json FILE]

#include <cstdio>
#include <functional>
#include <future>
#include <stdexcept>
#include <memory>
#include <string>
#include <vector>

#include <caf/actor_cast.hpp>
#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/send.hpp>

#include "bench/caf_setup.hpp"
#include "bench/host_strategy.hpp"
#include "bench/common.hpp"
#include "bench/message_counter.hpp"
#include "varsync/actor_api.hpp"
#include "varsync/varsync.hpp"

using namespace varsync;
using bench::clock_type;

namespace {

double median_of(std::vector<double> xs) {
  return bench::summarize(std::move(xs)).median;
}

// Bare CAF: one-way messages per second to a counting event-based actor.
double bare_oneway_rate(caf::actor_system& sys, int64_t k) {
  auto done = std::make_shared<std::promise<void>>();
  auto fut = done->get_future();
  auto counter = sys.spawn([k, done](caf::event_based_actor*) -> caf::behavior {
    auto seen = std::make_shared<int64_t>(0);
    return {[seen, k, done](int) {
      if (++*seen == k)
        done->set_value();
    }};
  });
  auto t0 = clock_type::now();
  for (int64_t i = 0; i < k; ++i)
    caf::anon_send(counter, 1);
  fut.wait();
  auto t = bench::seconds_since(t0);
  caf::anon_send_exit(counter, caf::exit_reason::user_shutdown);
  return static_cast<double>(k) / t;
}

// An actor bound to a replica: `k` local_update requests, `window` in flight.
double typed_rate(caf::actor_system& sys, replica_local_actor replica, uint64_t id,
                  int64_t k, int window) {
  auto done = std::make_shared<std::promise<double>>();
  auto fut = done->get_future();
  sys.spawn([=](caf::event_based_actor* self) {
    struct state {
      int64_t sent = 0;
      int64_t received = 0;
      clock_type::time_point t0;
    };
    auto st = std::make_shared<state>();
    auto one = tensor::scalar<double>(1.0);
    // send_one refers to itself through a plain pointer; the actor owns it.
    auto send_one = std::make_shared<std::function<void()>>();
    auto* again = send_one.get();
    self->attach_functor([send_one](const caf::error&) {});
    st->t0 = clock_type::now();
    *send_one = [=] {
      ++st->sent;
      self->request(replica, caf::infinite, local_update_atom::value, id,
                    update_op::assign_add, one)
        .then(
          [=](ok_atom) {
            if (++st->received == k) {
              auto rate = static_cast<double>(k) / bench::seconds_since(st->t0);
              self->quit();
              done->set_value(rate);
              return;
            }
            if (st->sent < k)
              (*again)();
          },
          [=](caf::error& err) {
            self->quit();
            done->set_exception(std::make_exception_ptr(
              std::runtime_error(describe(err))));
          });
    };
    for (int i = 0; i < window && st->sent < k; ++i)
      (*send_one)();
  });
  return fut.get();
}

struct message_counts {
  uint64_t coordinator = 0;
  uint64_t replicas = 0;
  uint64_t all = 0;
  uint64_t collectives = 0;
};

} // namespace

int main(int argc, char** argv) {
  auto opt = bench::parse_options(argc, argv);
  bench::recorder rec{opt.json};
  const int64_t m = opt.quick ? 200000 : 1000000;
  const int64_t m_count = 1000000; // the large M of the message count
  const int reps = opt.quick ? 3 : 5;
  const int64_t oneway_k = opt.quick ? 500000 : 2000000;

  caf::actor_system_config cfg;
  bench::configure(cfg);
  caf::actor_system sys{cfg};

  // -- reference: bare one-way rate --------------------------------------------
  std::vector<double> oneway;
  (void) bare_oneway_rate(sys, oneway_k / 10); // warm-up
  for (int i = 0; i < reps; ++i)
    oneway.push_back(bare_oneway_rate(sys, oneway_k));
  auto bare = median_of(oneway);
  std::printf("bare CAF one-way messages (anon_send int):  %12.0f msg/s\n",
              bare);
  rec.record("local.bare_oneway", bare, "1/s",
             {{"messages", static_cast<double>(oneway_k)}});

  for (int replicas : {1, 2, 4}) {
    auto s = bench::host_strategy(sys, replicas);
    if (!s)
      return 1;
    auto v = s->create_variable("hits", tensor::scalar<double>(0),
                                synchronization::on_read, aggregation::sum);
    if (!v) {
      std::fprintf(stderr, "%s\n", describe(v.error()).c_str());
      return 1;
    }
    auto tag = ".r" + std::to_string(replicas);
    double expected = 0;
    auto timed_step = [&](int64_t count, bool tensor_overload) {
      auto one = tensor::scalar<double>(1.0);
      auto t0 = clock_type::now();
      auto err = s->run([&](replica_context& ctx) {
        if (tensor_overload)
          for (int64_t i = 0; i < count; ++i)
            (void) ctx.assign_add(*v, one);
        else
          for (int64_t i = 0; i < count; ++i)
            (void) ctx.assign_add(*v, 1.0);
      });
      auto t = bench::seconds_since(t0);
      if (err)
        std::fprintf(stderr, "step failed: %s\n", describe(err).c_str());
      expected += static_cast<double>(count) * replicas;
      return t;
    };
    for (bool tensor_overload : {false, true}) {
      (void) timed_step(m / 10, tensor_overload); // warm-up
      std::vector<double> rates;
      for (int i = 0; i < reps; ++i)
        rates.push_back(static_cast<double>(m) / timed_step(m, tensor_overload));
      auto rate = median_of(rates);
      const char* what = tensor_overload ? "tensor" : "scalar";
      std::printf("%d replica(s): step assign_add(v, %s) x %lld: %12.0f "
                  "updates/s per replica\n",
                  replicas, tensor_overload ? "tensor" : "1.0",
                  static_cast<long long>(m), rate);
      rec.record(std::string{"local.step."} + what + tag, rate, "1/s",
                 {{"m", static_cast<double>(m)}});
    }
    auto total = s->read(*v);
    if (!total || total->as_double() != expected)
      std::fprintf(stderr, "WARNING: the sum is %g, expected %g\n",
                   total ? total->as_double() : -1.0, expected);

    // -- messages that left the replicas ----------------------------------------
    if (replicas == 2) {
      bench::msgcount::watch(0, caf::actor_cast<caf::abstract_actor*>(
                                  coordinator_of(*s)));
      for (int r = 0; r < replicas; ++r)
        bench::msgcount::watch(1 + r, caf::actor_cast<caf::abstract_actor*>(
                                        replica_of(*s, r)));
      auto count_step = [&](int64_t count) {
        message_counts out;
        auto before = s->stats();
        auto c0 = bench::msgcount::received(0);
        uint64_t r0 = 0;
        for (int r = 0; r < replicas; ++r)
          r0 += bench::msgcount::received(1 + r);
        auto a0 = bench::msgcount::total();
        (void) timed_step(count, false);
        out.coordinator = bench::msgcount::received(0) - c0;
        uint64_t r1 = 0;
        for (int r = 0; r < replicas; ++r)
          r1 += bench::msgcount::received(1 + r);
        out.replicas = r1 - r0;
        out.all = bench::msgcount::total() - a0;
        auto after = s->stats();
        if (before && after)
          out.collectives = after->collectives_run - before->collectives_run;
        return out;
      };
      auto small = count_step(1);
      auto large = count_step(m_count);
      if (!bench::msgcount::active())
        std::printf("WARNING: the message counter is not active\n");
      std::printf("messages during one step (2 replicas), M = 1 / M = %lld: "
                  "to coordinator %llu / %llu, to replicas %llu / %llu, to "
                  "all actors %llu / %llu; collectives run %llu / %llu\n",
                  static_cast<long long>(m_count),
                  (unsigned long long) small.coordinator,
                  (unsigned long long) large.coordinator,
                  (unsigned long long) small.replicas,
                  (unsigned long long) large.replicas,
                  (unsigned long long) small.all,
                  (unsigned long long) large.all,
                  (unsigned long long) small.collectives,
                  (unsigned long long) large.collectives);
      auto active = bench::msgcount::active() ? 1.0 : 0.0;
      for (auto& [name, c] :
           {std::pair<const char*, message_counts>{"m1", small},
            std::pair<const char*, message_counts>{"mbig", large}}) {
        std::string base = std::string{"local.messages."} + name;
        rec.record(base + ".coordinator", static_cast<double>(c.coordinator),
                   "messages", {{"m", name[1] == '1' ? 1.0 : double(m_count)},
                                {"counter_active", active}});
        rec.record(base + ".replicas", static_cast<double>(c.replicas),
                   "messages");
        rec.record(base + ".all", static_cast<double>(c.all), "messages");
        rec.record(base + ".collectives", static_cast<double>(c.collectives),
                   "collectives");
      }

      // -- the replica's typed interface from a bound actor ---------------------
      const int64_t k = opt.quick ? 100000 : 400000;
      (void) typed_rate(sys, replica_of(*s, 0), v->id(), k / 10, 64);
      std::vector<double> rates;
      for (int i = 0; i < reps; ++i)
        rates.push_back(typed_rate(sys, replica_of(*s, 0), v->id(), k, 64));
      auto rate = median_of(rates);
      std::printf("typed interface: local_update_atom from a bound actor "
                  "(64 in flight): %12.0f updates/s\n",
                  rate);
      rec.record("local.typed" + tag, rate, "1/s",
                 {{"in_flight", 64}, {"requests", static_cast<double>(k)}});
    }
    s->shutdown();
  }
}
