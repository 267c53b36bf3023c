// service: varsync inside an event-driven CAF application. No blocking calls
// on the hot path: actors talk to the strategy's actors directly.
//
//  - requests_served (ON_READ + SUM, int64): each request handler, bound to
//    one replica, counts locally on that replica (no communication per
//    request); the coordinator's cross-replica read is the total.
//  - rate_limit (ON_WRITE, float64): a configuration value the control actor
//    pushes to every replica; handlers read their local copy.
//
// handlers[r]: on `request(id, size)` add 1 to requests_served on replica r,
//              read rate_limit on replica r, answer admitted = size <= limit.
// generator:   sends the requests in paced bursts, unevenly over the handlers,
//              and counts the answers.
// control:     every few ms reads the total from the coordinator and pushes
//              a new rate_limit (stricter when the load is high); when asked
//              to stop, a last tick reads the final total and closes the
//              gate (rate_limit 0), a value no earlier tick pushes.
//
// Checks at the end: the total equals the requests sent, each replica counted
// exactly the requests its handler got, and every replica holds the last
// pushed rate_limit. Exits non-zero otherwise; a watchdog ends a hung run.
//
// Across processes (started by varsync-run, torchrun, mpirun or srun): the
// four replicas are spread over the processes, in services mode. Each
// process serves the requests of its own replicas; the control actor runs
// in process 0 only, and its reads and pushes reach every process. The
// processes finish through the strategy itself: each adds 1 to `finished`
// (ON_WRITE + SUM); process 0 waits for all, runs the control's last tick
// and creates `closed`; the others wait for `closed`, after which the last
// push is on every replica (one order, P2), and check their replicas.
//
//   service [--smoke]
//
// Options are CAF options (--long-help lists them; caf-application.ini in
// the working directory can set them under [global]).

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <caf/all.hpp>

#include "example_cluster.hpp"
#include "example_main.hpp"
#include "varsync/actor_api.hpp"
#include "varsync/varsync.hpp"

using namespace varsync;
using namespace std::chrono_literals;

namespace {

using request_atom = caf::atom_constant<caf::atom("request")>;
using burst_atom = caf::atom_constant<caf::atom("burst")>;
using wait_atom = caf::atom_constant<caf::atom("wait")>;
using tick_atom = caf::atom_constant<caf::atom("tick")>;
using stop_atom = caf::atom_constant<caf::atom("stop")>;

constexpr auto call_timeout = 2s;       // every request between actors
constexpr auto overall_deadline = 30s;  // main's wait for all answers
constexpr auto control_period = 10ms;
constexpr int burst_size = 50;
constexpr auto burst_period = 1ms;
constexpr double initial_limit = 10.0;

// Request i goes to handler 0, 1, 2, 3 with weights 4 : 3 : 2 : 1, so the
// replicas see uneven load.
int handler_for(int64_t i) {
  int k = int(i % 10);
  return k < 4 ? 0 : k < 7 ? 1 : k < 9 ? 2 : 3;
}

// Request sizes 1..10; a handler admits a request if size <= rate_limit.
int64_t size_of_request(int64_t i) {
  return 1 + (i * 7919) % 10;
}

// The busier the service, the stricter the limit (between 3 and 10).
double limit_for(int64_t requests_per_tick) {
  return std::clamp(14.0 - double(requests_per_tick) / 50.0, 3.0, 10.0);
}

// -- request handler: one per replica ------------------------------------------

caf::behavior handler(caf::event_based_actor* self, replica_local_actor replica,
                      uint64_t served_id, uint64_t limit_id) {
  return {
    [=](request_atom, int64_t, int64_t size) {
      auto rp = self->make_response_promise();
      auto fail = [rp](caf::error& err) mutable { rp.deliver(std::move(err)); };
      // Replica context outside a step: both calls touch replica r only.
      self
        ->request(replica, call_timeout, local_update_atom::value, served_id,
                  update_op::assign_add, tensor::scalar<int64_t>(1))
        .then(
          [=](ok_atom) mutable {
            self->request(replica, call_timeout, local_read_atom::value, limit_id)
              .then(
                [=](const tensor& limit) mutable {
                  rp.deliver(double(size) <= limit.as_double());
                },
                fail);
          },
          fail);
      return rp;
    },
  };
}

// -- load generator ---------------------------------------------------------------

struct generator_state {
  int64_t next = 0;
  int64_t answered = 0;
  int64_t admitted = 0;
  int64_t rejected = 0;
  int64_t failed = 0;
  caf::response_promise waiting;
};

// Sends requests 0 .. total-1 to their handlers; across processes only those
// whose handler is here (`handlers` holds an invalid handle for the others)
// and expects `expected` answers.
caf::behavior generator(caf::stateful_actor<generator_state>* self,
                        std::vector<caf::actor> handlers, int64_t total,
                        int64_t expected) {
  auto finish_if_done = [self, expected] {
    auto& st = self->state;
    if (st.answered == expected && st.waiting.pending())
      st.waiting.deliver(st.admitted, st.rejected, st.failed);
  };
  self->send(self, burst_atom::value);
  return {
    [=](burst_atom) {
      auto& st = self->state;
      for (int k = 0; k < burst_size && st.next < total; ++st.next) {
        int64_t id = st.next;
        if (!handlers[size_t(handler_for(id))])
          continue; // another process serves it
        ++k;
        self
          ->request(handlers[size_t(handler_for(id))], call_timeout,
                    request_atom::value, id, size_of_request(id))
          .then(
            [=](bool admitted) {
              ++self->state.answered;
              ++(admitted ? self->state.admitted : self->state.rejected);
              finish_if_done();
            },
            [=](caf::error& err) {
              if (self->state.failed++ == 0)
                std::printf("request %lld failed: %s\n", (long long)id,
                            describe(err).c_str());
              ++self->state.answered;
              finish_if_done();
            });
      }
      if (st.next < total)
        self->delayed_send(self, burst_period, burst_atom::value);
    },
    [=](wait_atom) {
      self->state.waiting = self->make_response_promise();
      finish_if_done();
      return self->state.waiting;
    },
  };
}

// -- control loop -------------------------------------------------------------------

struct control_state {
  int64_t last_count = 0;
  double last_pushed = initial_limit;
  int64_t failed = 0;
  bool busy = false;
  bool final_tick = false;
  caf::response_promise stopping;
};

void control_tick(caf::stateful_actor<control_state>* self,
                  coordinator_actor coordinator, uint64_t served_id,
                  uint64_t limit_id) {
  self->state.busy = true;
  // After the tick: schedule the next one, or run one last tick (which sees
  // the final count) and report to whoever asked us to stop.
  auto done = [=] {
    auto& st = self->state;
    st.busy = false;
    if (!st.stopping.pending()) {
      self->delayed_send(self, control_period, tick_atom::value);
    } else if (!st.final_tick) {
      st.final_tick = true;
      control_tick(self, coordinator, served_id, limit_id);
    } else {
      st.stopping.deliver(st.last_count, st.last_pushed, st.failed);
      self->quit();
    }
  };
  auto fail = [=](caf::error& err) {
    std::printf("control: %s\n", describe(err).c_str());
    ++self->state.failed;
    done();
  };
  const bool closing = self->state.final_tick;
  // Cross-replica read: the SUM over the replicas' local counts.
  self->request(coordinator, call_timeout, read_atom::value, served_id)
    .then(
      [=](const tensor& t) {
        int64_t count = t.to_vector<int64_t>()[0];
        int64_t load = count - self->state.last_count;
        double limit = closing ? 0.0 : limit_for(load);
        // Cross-replica assign of an ON_WRITE variable: every component.
        self
          ->request(coordinator, call_timeout, update_atom::value, limit_id,
                    update_op::assign, tensor::scalar<double>(limit))
          .then(
            [=](ok_atom) {
              auto& st = self->state;
              std::printf("control: served %5lld (+%4lld) -> rate_limit %.2f%s\n",
                          (long long)count, (long long)load, limit,
                          closing ? " (closed)" : "");
              st.last_count = count;
              st.last_pushed = limit;
              done();
            },
            fail);
      },
      fail);
}

caf::behavior control(caf::stateful_actor<control_state>* self,
                      coordinator_actor coordinator, uint64_t served_id,
                      uint64_t limit_id) {
  self->send(self, tick_atom::value);
  return {
    [=](tick_atom) {
      if (!self->state.stopping.pending())
        control_tick(self, coordinator, served_id, limit_id);
    },
    [=](stop_atom) {
      auto& st = self->state;
      st.stopping = self->make_response_promise();
      if (!st.busy) {
        st.final_tick = true;
        control_tick(self, coordinator, served_id, limit_id);
      }
      return st.stopping;
    },
  };
}

template <class T>
T must(caf::expected<T> x, const char* what) {
  if (!x) {
    std::printf("FAILED  %s: %s\n", what, describe(x.error()).c_str());
    std::fflush(stdout);
    std::_Exit(1); // skip destructors: waiting for actors could hang
  }
  return std::move(*x);
}

struct service_options : caf::actor_system_config {
  bool smoke = false;
  std::vector<examples::flag> flags{{&smoke, "smoke"}};

  service_options() {
    register_types(*this);
    tune_scheduler(*this);
    set("scheduler.max-threads", 2);
    set("logger.verbosity", caf::atom("quiet"));
    opt_group{custom_options_, "global"}.add<bool>(
      "smoke", "a short run (400 requests instead of 4000)");
  }
};

using config = examples::config<service_options>;

} // namespace

int caf_main(caf::actor_system& sys, const config& cfg) {
  const int64_t total = cfg.smoke ? 400 : 4000;

  // Whatever happens (even a hung actor system destructor), never hang.
  std::thread([] {
    std::this_thread::sleep_for(overall_deadline + 30s);
    std::printf("FAILED  watchdog: still running after %lld s\n",
                (long long)(overall_deadline + 30s).count());
    std::fflush(stdout);
    std::_Exit(3);
  }).detach();

  // Four replicas in all: here, or spread over the processes a launcher
  // started (services mode: each process issues its own operations).
  strategy_options opts;
  opts.timeout = 5s;
  examples::spread_replicas(opts, 4);
  if (opts.cluster)
    opts.cluster->mode = cluster_mode::services;
  const int local = static_cast<int>(opts.devices.size());
  auto s = must(strategy::create(sys, opts), "create strategy");
  const int n = s.num_replicas();
  const int first = s.first_local_replica();
  const int procs = s.num_processes();
  const bool controller = s.process_rank() == 0;
  auto is_local = [&](int r) { return r >= first && r < first + local; };

  // Process 0 creates the variables; the others wait until they exist
  // (C10: every operation issued after the wait is ordered after the
  // creation).
  auto find = [&](const char* name) {
    return must(s.with_timeout(std::chrono::duration_cast<
                                 std::chrono::milliseconds>(overall_deadline))
                  .wait_for_variable(name),
                name);
  };
  if (controller) {
    must(s.create_variable("requests_served", tensor::scalar<int64_t>(0),
                           synchronization::on_read, aggregation::sum),
         "create requests_served");
    must(s.create_variable("rate_limit", tensor::scalar<double>(initial_limit),
                           synchronization::on_write, aggregation::none),
         "create rate_limit");
    must(s.create_variable("finished", tensor::scalar<int64_t>(0),
                           synchronization::on_write, aggregation::sum),
         "create finished");
  }
  auto served = find("requests_served");
  auto rate_limit = find("rate_limit");
  auto finished = find("finished");

  std::printf("service: %lld requests over %d handlers (one per replica%s), "
              "control every %lld ms\n",
              (long long)total, n,
              procs > 1 ? (", " + std::to_string(local) + " in this process")
                            .c_str()
                        : "",
              (long long)control_period.count());

  // Handlers for this process's replicas; this process sends the requests
  // that go to them (all processes together send every request once).
  std::vector<caf::actor> handlers(static_cast<size_t>(n));
  for (int r = first; r < first + local; ++r)
    handlers[size_t(r)] =
      sys.spawn(handler, replica_of(s, r), served.id(), rate_limit.id());
  std::optional<caf::actor> ctl;
  if (controller)
    ctl = sys.spawn(control, coordinator_of(s), served.id(), rate_limit.id());
  int64_t mine = 0;
  for (int64_t i = 0; i < total; ++i)
    mine += is_local(handler_for(i)) ? 1 : 0;
  auto gen = sys.spawn(generator, handlers, total, mine);

  int failures = 0;
  auto t0 = std::chrono::steady_clock::now();
  caf::scoped_actor self{sys};
  int64_t admitted = 0, rejected = 0, failed = 0;
  self->request(gen, overall_deadline, wait_atom::value)
    .receive(
      [&](int64_t a, int64_t r, int64_t f) {
        admitted = a;
        rejected = r;
        failed = f;
      },
      [&](caf::error& err) {
        std::printf("FAILED  waiting for the answers: %s\n",
                    describe(err).c_str());
        ++failures;
      });
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  // Across processes: every process reports its requests answered, and
  // process 0 waits for all of them before the control's last tick.
  if (procs > 1)
    if (auto err = s.assign_add(finished, 1.0)) {
      std::printf("FAILED  report finished: %s\n", describe(err).c_str());
      std::fflush(stdout);
      std::_Exit(1);
    }
  if (controller && procs > 1) {
    auto deadline = std::chrono::steady_clock::now() + overall_deadline;
    for (;;) {
      auto n_done = must(s.read(finished), "read finished").to_vector<int64_t>()[0];
      if (n_done >= procs)
        break;
      if (std::chrono::steady_clock::now() > deadline) {
        std::printf("FAILED  only %lld of %d processes finished\n",
                    (long long)n_done, procs);
        ++failures;
        break;
      }
      std::this_thread::sleep_for(2ms);
    }
  }

  // The control actor runs one last tick, which must see every request.
  int64_t control_count = -1;
  double last_pushed = 0.0; // the closing push, as the other processes see it
  if (ctl)
    self->request(*ctl, 5s, stop_atom::value)
      .receive(
        [&](int64_t count, double limit, int64_t control_failures) {
          control_count = count;
          last_pushed = limit;
          failed += control_failures;
        },
        [&](caf::error& err) {
          std::printf("FAILED  stopping the control actor: %s\n",
                      describe(err).c_str());
          ++failures;
        });

  std::printf("answered %lld requests in %.3f s: %lld admitted, %lld "
              "rejected, %lld failed\n",
              (long long)(admitted + rejected + failed), secs,
              (long long)admitted, (long long)rejected, (long long)failed);
  if (failed != 0 || admitted + rejected != mine) {
    std::printf("FAILED  expected %lld answered requests and no failures\n",
                (long long)mine);
    ++failures;
  }

  // The aggregate over every process, as the control actor saw it and as a
  // fresh read (in process 0: the others check only what is local, so that
  // none needs another process once it is done).
  if (controller) {
    auto count = s.read(served);
    int64_t sum = count ? count->to_vector<int64_t>()[0] : -1;
    std::printf("requests_served: %lld (control's last read %lld), expected "
                "%lld\n",
                (long long)sum, (long long)control_count, (long long)total);
    if (sum != total || control_count != total) {
      std::printf("FAILED  wrong aggregate%s%s\n", count ? "" : ": ",
                  count ? "" : describe(count.error()).c_str());
      ++failures;
    }
  }
  // Process 0 marks the end: the others see the closing push once they
  // see this (it was ordered after the push).
  if (procs > 1) {
    if (controller)
      must(s.create_variable("closed", tensor::scalar<int64_t>(1),
                             synchronization::on_write, aggregation::sum),
           "create closed");
    else
      find("closed");
  }

  // Each of this process's replicas counted exactly the requests its
  // handler got.
  std::vector<int64_t> want(size_t(n), 0);
  for (int64_t i = 0; i < total; ++i)
    ++want[size_t(handler_for(i))];
  auto per_replica = s.local_values(served);
  std::printf("per replica:");
  for (int r = first; r < first + local; ++r) {
    int64_t got = per_replica
                    ? per_replica->at(size_t(r - first)).to_vector<int64_t>()[0]
                    : -1;
    std::printf(" %d:%lld", r, (long long)got);
    if (got != want[size_t(r)]) {
      std::printf(" (expected %lld)", (long long)want[size_t(r)]);
      ++failures;
    }
  }
  std::printf("\n");

  // Every replica holds the value pushed last: 0, the gate closed.
  auto limits = s.local_values(rate_limit);
  if (last_pushed != 0.0) {
    std::printf("FAILED  the control actor's last push was %.2f, not 0\n",
                last_pushed);
    ++failures;
  }
  std::printf("rate_limit on every replica:");
  for (int r = first; r < first + local; ++r) {
    double got = limits ? limits->at(size_t(r - first)).as_double() : -1;
    std::printf(" %.2f", got);
    if (got != last_pushed) {
      std::printf(" (expected %.2f)", last_pushed);
      ++failures;
    }
  }
  std::printf("\n");

  // Shut down: our actors first, then the strategy's; the actor system's
  // destructor waits for every actor. Across processes, process 0's
  // shutdown waits for the others to leave.
  for (auto& h : handlers)
    if (h)
      caf::anon_send_exit(h, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(gen, caf::exit_reason::user_shutdown);
  if (ctl)
    caf::anon_send_exit(*ctl, caf::exit_reason::user_shutdown);
  s.shutdown();

  std::printf(failures ? "service: FAILED\n" : "service: all checks passed\n");
  return failures ? 1 : 0;
}

VARSYNC_MAIN()
