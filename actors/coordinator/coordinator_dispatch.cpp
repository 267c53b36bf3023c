// The coordinator's one dispatch: every operation, from whichever adapter
// (actor request, async or blocking call, checkpoint, services mode's
// sequencer), runs through execute().

#include "actors/coordinator/coordinator_state.hpp"

#include "actors/coordinator/coordinator_helpers.hpp"
#include "actors/coordinator/services_ordering.hpp"

#include <string>
#include <type_traits>
#include <utility>

#include "varsync/error.hpp"

namespace varsync {

namespace {

// One overload per operation: the coordinator's function that runs it.
struct runner {
  coordinator_state& c;
  caf::timespan t;

  void operator()(ops::create& x, reply_fn<shared_variable_info> d) {
    c.create(t, std::move(x.spec), std::move(d));
  }
  void operator()(ops::lookup& x, reply_fn<shared_variable_info> d) {
    c.lookup(x.variable_name, std::move(d));
  }
  void operator()(ops::list&, reply_fn<std::vector<variable_info>> d) {
    c.list(std::move(d));
  }
  void operator()(ops::destroy& x, reply_fn<ok_atom> d) {
    c.destroy(t, x.variable, std::move(d));
  }
  void operator()(ops::read& x, reply_fn<tensor> d) {
    c.read(t, x.variable, std::move(d));
  }
  void operator()(ops::update& x, reply_fn<ok_atom> d) {
    c.update(t, x.variable, x.how, std::move(x.value), std::move(d));
  }
  void operator()(ops::scatter& x, reply_fn<ok_atom> d) {
    c.scatter(t, x.variable, x.how, std::move(x.slices), std::move(d));
  }
  void operator()(ops::local_values& x, reply_fn<std::vector<tensor>> d) {
    c.local_values(t, x.variable, std::move(d));
  }
  void operator()(ops::all_values& x, reply_fn<std::vector<tensor>> d) {
    c.all_values(t, x.variable, std::move(d));
  }
  void operator()(ops::survivor_values& x,
                  reply_fn<std::vector<std::optional<tensor>>> d) {
    c.survivor_values(t, x.variable, std::move(d));
  }
  void operator()(ops::run& x, reply_fn<ok_atom> d) {
    c.run(t, std::move(x.step), std::move(d));
  }
  void operator()(ops::all_reduce& x, reply_fn<std::vector<tensor>> d) {
    c.all_reduce(t, x.how, std::move(x.values), std::move(d));
  }
  void operator()(ops::describe&, reply_fn<strategy_description> d) {
    c.describe(std::move(d));
  }
  // A snapshot asks the replicas within the strategy's own timeout,
  // whoever asks.
  void operator()(ops::metrics&, reply_fn<strategy_metrics> d) {
    c.metrics(c.default_timeout(), std::move(d));
  }
  void operator()(ops::agree& x, reply_fn<ok_atom> d) {
    c.agree_outcome(t, std::move(x.what), std::move(x.local), std::move(d));
  }
  void operator()(ops::wait_for& x, reply_fn<shared_variable_info> d) {
    c.wait_for(t, std::move(x.variable_name), std::move(d));
  }
  void operator()(ops::barrier&, reply_fn<ok_atom> d) {
    c.barrier(t, std::move(d));
  }
  void operator()(ops::metrics_of_processes&,
                  reply_fn<std::vector<strategy_metrics>> d) {
    c.metrics_of_processes(t, std::move(d));
  }
};

// A client call's answer, shared by the copies of its reply function:
// answered once; the call's place among its caller's outstanding calls is
// given back and, if it holds an admission slot (`admitted`), the slot
// released and its outcome counted first, so that `fn` may start the next
// call; if the last copy is dropped unanswered (the coordinator stopped
// with the operation in flight), `fn` gets shut_down, so that no caller
// waits for an answer that cannot come. One object, not a chain of
// wrappers: this runs for every call of the async and blocking APIs.
//
// It closes the call's flight recorder entry too (M7), where there is one:
// a wrapper of its own would cost an allocation per call.
template <class T>
struct call_reply {
  coordinator_state* c;
  bool admitted;
  reply_fn<T> fn;
  outstanding_slot counted;
  std::shared_ptr<flight_recorder> flight;
  uint64_t flight_id = 0;

  void operator()(caf::expected<T> r) {
    auto f = std::move(fn);
    fn = nullptr;
    if (!f)
      return;
    if (flight_id != 0)
      flight->finish(flight_id, r ? caf::error{} : r.error());
    counted.give_back();
    if (admitted) {
      c->release_slot();
      c->count_outcome(r);
    }
    f(std::move(r));
  }

  ~call_reply() {
    counted.give_back();
    if (!fn)
      return;
    auto err = make_error(errc::shut_down, "the strategy shut down before "
                                           "the operation completed");
    if (flight_id != 0)
      flight->finish(flight_id, err);
    fn(std::move(err));
  }
};

template <class T>
reply_fn<T> reply_to_call(coordinator_state* c, bool admitted,
                          client_call& call, reply_fn<T> fn,
                          const std::shared_ptr<flight_recorder>& flight,
                          uint64_t flight_id) {
  auto reply = std::make_shared<call_reply<T>>();
  reply->c = c;
  reply->admitted = admitted;
  reply->fn = std::move(fn);
  reply->counted = std::move(call.counted);
  if (flight_id != 0) {
    reply->flight = flight;
    reply->flight_id = flight_id;
  }
  return [reply](caf::expected<T> r) { (*reply)(std::move(r)); };
}

// This process, as the issuer of an operation.
flight_recorder::origin here(const std::optional<process_layout>& processes) {
  return {processes ? processes->rank : 0, 0};
}

// Records `op` in the flight recorder (M7), `queued` where it waits for
// admission; 0 for the reports (describe, metrics), which are not
// recorded: a scraper would push the operations out of the ring.
uint64_t begin_flight(flight_recorder& flight, const operation& op,
                      flight_recorder::origin from, bool queued) {
  if (std::holds_alternative<ops::describe>(op)
      || std::holds_alternative<ops::metrics>(op))
    return 0;
  uint64_t id = 0;
  std::visit(
    [&](auto& x) {
      using Op = std::decay_t<decltype(x)>;
      uint64_t variable = 0;
      std::string name;
      if constexpr (requires { x.variable; })
        variable = x.variable;
      else if constexpr (requires { x.variable_name; })
        name = x.variable_name;
      id = flight.begin(Op::name, variable, name, from, queued);
    },
    op);
  return id;
}

} // namespace

void coordinator_state::execute(caf::timespan timeout, operation&& op,
                                completion&& done,
                                std::optional<flight_recorder::origin> from,
                                uint64_t recorded, bool done_closes) {
  uint64_t id = recorded;
  if (done_closes) {
    // start_call opened the entry, and its answer closes it.
  } else if (flight_ && id != 0) {
    flight_->admitted(id);
  } else if (flight_) {
    id = begin_flight(*flight_, op, from.value_or(here(processes)), false);
  }
  if (id != 0 && !done_closes) // its answer closes the entry
    done = wrap_completion(std::move(done), [this, id](auto fn) {
      return coordinator_helpers::closing_flight(flight_, id, std::move(fn));
    });
  if (ordering_->take(timeout, op, done)) {
    if (flight_)
      flight_->sequencing(id);
    return;
  }
  coordinator_helpers::restore_on_exit scope{flight_now_, id};
  std::visit(
    [this, timeout, &done](auto& x) {
      using Op = std::decay_t<decltype(x)>;
      auto* fn = std::get_if<reply_fn<result_of<Op>>>(&done);
      if (fn == nullptr) {
        // Appended, not a chain of +: GCC 12 warns (-Warray-bounds) about
        // the moved temporaries of the chain.
        std::string what = "the ";
        what.append(Op::name).append(" operation was given a completion of "
                                     "another result type");
        return fail(done, make_error(errc::invalid_argument, what));
      }
      runner{*this, timeout}(x, std::move(*fn));
    },
    op);
}

uint64_t coordinator_state::record_ordered(const operation& op,
                                           flight_recorder::origin from) {
  return flight_ ? begin_flight(*flight_, op, from, false) : 0;
}

uint64_t coordinator_state::note_if_queued(const operation& op) {
  if (!flight_ || !admission_.would_queue())
    return 0;
  return begin_flight(*flight_, op, here(processes), true);
}

void coordinator_state::start_call(const client_call_ptr& call,
                                   bool admitted, uint64_t recorded) {
  auto done = call->take_completion();
  if (admitted && call->state) {
    int expected = call_pending;
    if (!call->state->compare_exchange_strong(expected, call_started)) {
      // The blocking caller has its answer (timeout, nothing changed).
      call->counted.give_back();
      release_slot();
      // Counted as a deadline hit.
      record_.deadline_missed();
      if (flight_ && recorded != 0)
        flight_->finish(recorded,
                        make_error(errc::timeout,
                                   "its blocking caller's deadline passed "
                                   "while it waited for admission"));
      return;
    }
  }
  // The entry (M7) opens here, so that the answer closes it.
  uint64_t id = recorded;
  if (flight_ && id != 0)
    flight_->admitted(id);
  else if (flight_)
    id = begin_flight(*flight_, call->op, here(processes), false);
  done = wrap_completion(std::move(done),
                         [this, admitted, &call, id](auto fn) {
                           return reply_to_call(this, admitted, *call,
                                                std::move(fn), flight_, id);
                         });
  // The deadline counts from the request, not from when the coordinator
  // got to it.
  run_requested_at(call->submitted, [&] {
    execute(call->timeout, std::move(call->op), std::move(done), std::nullopt,
            id, true);
  });
}

void coordinator_state::wait_for(caf::timespan timeout, std::string name,
                                 reply_fn<shared_variable_info> done) {
  if (name.empty())
    return done(make_error(errc::invalid_argument,
                           "wait_for_variable: the empty name names no "
                           "variable (C7)"));
  if (auto info = existing(name))
    return done(std::move(info));
  auto left = remaining(timeout, "wait_for_variable");
  if (!left)
    return done(std::move(left.error()));
  if (waits_.names_waiting() >= admission_.max_queued_operations())
    return done(make_error(errc::overloaded,
                           "refused: "
                             + std::to_string(admission_.max_queued_operations())
                             + " callers already wait for variables "
                               "(max_queued_operations); nothing was "
                               "changed, retry later"));
  waits_.wait_for(std::move(name), *left, std::move(done));
}

void coordinator_state::run(caf::timespan timeout, replica_step_ptr step,
                            reply_fn<ok_atom> done) {
  steps_.run(timeout, std::move(step), std::move(done));
}

void coordinator_state::barrier(caf::timespan timeout,
                                reply_fn<ok_atom> done) {
  ordering_->barrier(timeout, std::move(done));
}

void coordinator_state::choose_ordering() {
  if (processes && processes->submit_sequenced)
    ordering_ = std::make_unique<services_ordering>(
      *this, processes->submit_sequenced);
  else
    ordering_ = make_plain_ordering(*this, processes.has_value());
  admission_.set_in_flight_limit(ordering_->in_flight_limit());
}

void coordinator_state::agree_outcome(caf::timespan timeout, std::string what,
                                      caf::error local,
                                      reply_fn<ok_atom> done) {
  if (!ordering_->every_process_takes_part())
    return local ? done(std::move(local)) : done(ok_atom::value);
  agree(timeout, std::move(what), std::move(local), std::move(done));
}

} // namespace varsync
