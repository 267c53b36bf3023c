// The ordering of services mode (actors/coordinator/services_ordering.hpp).

#include "actors/coordinator/services_ordering.hpp"

#include <string>
#include <utility>

#include "actors/coordinator/coordinator_helpers.hpp"
#include "actors/coordinator/coordinator_state.hpp"
#include "core/logging.hpp"
#include "varsync/error.hpp"
#include "varsync/ext/metrics.hpp"

namespace varsync {


void services_ordering::ticket::answer(caf::error err) {
  answered = true;
  fail(done, std::move(err));
}

void services_ordering::ticket::expire() {
  watched = false;
  // The operation may still come back: it then fails everywhere on this
  // deadline (replay() runs it with the time the caller gave it).
  answer(make_error(errc::timeout,
                    "the operation was not applied within its deadline "
                    "(process 0 orders the operations of services mode, and "
                    "those before it were still running); nothing was "
                    "changed"));
}

bool services_ordering::orders_through_sequencer(const operation& op) {
  if (!sequenceable(op))
    return false;
  if (!sequencer_failure_)
    return true;
  // P3: after process 0 was lost, lookup, list, local_values and reads of
  // mirrored variables answer from this process; the rest fail with the
  // sequencer's failure.
  if (std::holds_alternative<ops::lookup>(op)
      || std::holds_alternative<ops::list>(op)
      || std::holds_alternative<ops::local_values>(op))
    return false;
  // Mirrored components are equal in every process (W7): this process's
  // answer is the answer. Aggregated reads need the others.
  if (auto* x = std::get_if<ops::read>(&op)) {
    auto e = c_.find(x->variable);
    return !(e && (*e)->policy()->mirrored());
  }
  return true;
}

void services_ordering::sequence(caf::timespan timeout, operation value,
                                 completion done) {
  if (sequencer_failure_)
    return fail(done, sequencer_failure_);
  auto left = c_.remaining(timeout, name_of(value));
  if (!left)
    return fail(done, std::move(left.error()));
  if (auto err = to_keys(value))
    return fail(done, std::move(err));
  auto t = std::make_unique<ticket>();
  t->since = operation_deadlines::clock::now()
             - std::chrono::duration_cast<operation_deadlines::clock::duration>(
               c_.admission_.queued_for());
  t->timeout = timeout;
  t->done = std::move(done);
  if (*left != caf::timespan::max()) {
    t->deadline = c_.deadlines_.watch(*left, t.get());
    t->watched = true;
  }
  auto op = make_sequenced(std::move(value));
  op.ticket = ++tickets_issued_;
  // Bulk data stays here and moves through the data plane at the
  // operation's turn; the sequencer and CAF carry its description only.
  if (defer_payload(op, t->payload))
    data_plane_bytes_ += static_cast<uint64_t>(
      payload_bytes(op.deferred));
  else
    inline_bytes_ += inline_payload_bytes(op);
  tickets_.emplace(op.ticket, std::move(t));
  submit_(std::move(op));
}

void services_ordering::ordered(sequenced_operation op) {
  ordered_.push_back(std::move(op));
  run_sequenced();
}

void services_ordering::run_sequenced() {
  // An operation that completes at once (lookup) lets the loop go on; one
  // that completes later starts the next from its completion.
  while (!applying_ordered_ && !ordered_.empty()) {
    to_local(ordered_.front());
    if (joins_group(ordered_.front())) {
      commit_group();
      continue;
    }
    auto op = std::move(ordered_.front());
    ordered_.pop_front();
    replay(std::move(op));
  }
}

caf::error services_ordering::to_keys(operation& op) {
  caf::error err;
  std::visit(
    [&](auto& x) {
      if constexpr (requires { x.variable + 0; }) {
        auto e = c_.find(x.variable);
        if (!e) {
          err = std::move(e.error());
          return;
        }
        auto i = key_of_id_.find(x.variable);
        if (i == key_of_id_.end()) {
          err = make_error(errc::replica_failed,
                           "services mode: variable "
                             + c_.quoted_name_of(x.variable)
                             + " was not created in its turn; nothing was "
                               "changed");
          return;
        }
        x.variable = i->second;
      }
    },
    op);
  return err;
}

void services_ordering::to_local(sequenced_operation& op) {
  if (op.local_ids)
    return;
  op.local_ids = true;
  std::visit(
    [this](auto& x) {
      if constexpr (requires { x.variable + 0; }) {
        auto i = id_of_key_.find(x.variable);
        x.variable = i == id_of_key_.end() ? 0 : i->second;
      }
    },
    op.op);
}

void services_ordering::created(uint64_t key, uint64_t id) {
  id_of_key_[key] = id;
  key_of_id_[id] = key;
}

void services_ordering::destroyed(uint64_t id) {
  if (auto i = key_of_id_.find(id); i != key_of_id_.end()) {
    id_of_key_.erase(i->second);
    key_of_id_.erase(i);
  }
}

void services_ordering::replay(sequenced_operation op) {
  if (op.sequence != last_sequence_ + 1)
    log()->error("services mode: operation {} arrived after {}; applying it "
                 "in the order it arrived",
                 op.sequence, last_sequence_);
  last_sequence_ = op.sequence;
  auto t = take_ticket(op);
  applying_ordered_ = true;
  // While replay() runs, run_sequenced's loop starts the next operation;
  // after it returned, the completion does.
  auto running = std::make_shared<bool>(true);
  auto finished = [this, running] {
    applying_ordered_ = false;
    if (!*running)
      run_sequenced();
  };
  std::shared_ptr<ticket> owner{std::move(t)};
  if (op.deferred.present)
    receive_payload(std::move(op), std::move(owner), std::move(finished));
  else
    apply_ordered(std::move(op), std::move(owner), std::move(finished));
  *running = false;
}

caf::error services_ordering::time_left(const ticket* t, const char* what,
                                        caf::timespan& timeout) {
  const auto since = t ? t->since : operation_deadlines::clock::now();
  timeout = t ? t->timeout : c_.default_timeout_;
  caf::error err;
  c_.run_requested_at(since, [&] {
    if (auto left = c_.remaining(timeout, what))
      timeout = *left;
    else
      err = std::move(left.error());
  });
  return err;
}

std::unique_ptr<services_ordering::ticket>
services_ordering::take_ticket(const sequenced_operation& op) {
  // The caller waits in the process that issued the operation; elsewhere
  // the outcome is dropped (each process reports it to its own log only).
  std::unique_ptr<ticket> t;
  if (op.origin != c_.processes->rank)
    return t;
  if (auto i = tickets_.find(op.ticket); i != tickets_.end()) {
    t = std::move(i->second);
    tickets_.erase(i);
    if (t->watched)
      c_.deadlines_.unwatch(t->deadline);
  }
  return t;
}

template <class T>
reply_fn<T> services_ordering::turn_reply(std::shared_ptr<ticket> owner,
                                          std::function<void()> finished) {
  return [owner = std::move(owner),
          finished = std::move(finished)](caf::expected<T> r) {
    if (owner && !owner->answered) {
      owner->answered = true;
      if (auto* fn = std::get_if<reply_fn<T>>(&owner->done))
        (*fn)(std::move(r));
      else
        fail(owner->done, make_error(errc::replica_failed,
                                     "the sequencer returned another "
                                     "operation for this call"));
    }
    finished();
  };
}

void services_ordering::apply_ordered(sequenced_operation op,
                                      std::shared_ptr<ticket> owner,
                                      std::function<void()> finished,
                                      uint64_t recorded) {
  if (std::holds_alternative<ops::barrier>(op.op))
    return arrive_at_barrier(op.origin, std::move(owner), std::move(finished));
  // The caller's completion where it waits here, wrapped to end the turn;
  // elsewhere one that only ends it.
  completion done = std::visit(
    [&owner, &finished](auto& x) -> completion {
      using T = result_of<std::decay_t<decltype(x)>>;
      return make_completion(turn_reply<T>(owner, finished));
    },
    op.op);
  // The keys learn what a create or destroy did here, before the turn ends.
  if (std::holds_alternative<ops::create>(op.op))
    done = make_completion(reply_fn<shared_variable_info>{
      [this, key = op.sequence,
       fn = std::move(std::get<reply_fn<shared_variable_info>>(done))](
        caf::expected<shared_variable_info> r) mutable {
        if (r && *r)
          created(key, (*r)->id);
        fn(std::move(r));
      }});
  else if (auto* x = std::get_if<ops::destroy>(&op.op))
    done = make_completion(reply_fn<ok_atom>{
      [this, id = x->variable,
       fn = std::move(std::get<reply_fn<ok_atom>>(done))](
        caf::expected<ok_atom> r) mutable {
        if (r)
          destroyed(id);
        fn(std::move(r));
      }});
  auto since = owner ? owner->since : operation_deadlines::clock::now();
  auto timeout = owner ? owner->timeout : c_.default_timeout_;
  auto saved = replaying_;
  replaying_ = true;
  c_.run_requested_at(since, [&] {
    c_.execute(timeout, std::move(op.op), std::move(done),
               flight_recorder::origin{op.origin, op.sequence, op.epoch},
               recorded);
  });
  replaying_ = saved;
}

void services_ordering::receive_payload(sequenced_operation op,
                                        std::shared_ptr<ticket> owner,
                                        std::function<void()> finished) {
  const auto what = std::string{"the data of "} + name_of(op.op)
                    + " from process " + std::to_string(op.origin);
  // Every process takes part in the round whatever fails here, so that
  // all of them fail the operation alike.
  caf::timespan timeout;
  caf::error local = time_left(owner.get(), "the data of an operation",
                               timeout);
  const auto bytes = payload_bytes(op.deferred);
  if (!local && (bytes < 0 || op.origin < 0
                 || op.origin >= c_.processes->processes))
    local = make_error(errc::replica_failed,
                       what + ": the operation describes data no operation "
                              "can have; nothing was changed");
  if (!local)
    local = c_.budget_.check(static_cast<uint64_t>(bytes), what);
  held_payload mine;
  if (!local && op.origin == c_.processes->rank) {
    if (owner)
      mine = std::move(owner->payload);
    if (!owner || mine.value.type() != op.deferred.type
        || mine.value.shape() != op.deferred.shape
        || static_cast<int64_t>(mine.indices.size()) != op.deferred.indices)
      local = make_error(errc::replica_failed,
                         what + ": this process no longer holds the data it "
                                "issued; nothing was changed");
  }
  const uint64_t recorded
    = c_.record_ordered(op.op, {op.origin, op.sequence, op.epoch});
  std::shared_ptr<collective_plan> plan;
  {
    coordinator_helpers::restore_on_exit scope{c_.flight_now_, recorded};
    plan = c_.new_plan(what);
  }
  plan->local_error = local;
  if (!local) {
    auto& value = plan->add_item();
    value.type = op.deferred.type;
    value.count = element_count(op.deferred.shape);
    value.from_process = op.origin;
    value.result = op.origin == c_.processes->rank
                     ? std::move(mine.value)
                     : tensor::empty(op.deferred.type, op.deferred.shape);
    if (std::holds_alternative<ops::scatter>(op.op)) {
      auto& indices = plan->add_item();
      indices.type = dtype::int64;
      indices.count = op.deferred.indices;
      indices.from_process = op.origin;
      indices.result
        = op.origin == c_.processes->rank
            ? tensor::from_vector<int64_t>({op.deferred.indices}, mine.indices)
            : tensor::empty(dtype::int64, {op.deferred.indices});
    }
  }
  c_.run_collective(
    timeout, plan,
    [this, plan, op = std::move(op), owner,
     finished = std::move(finished),
     recorded](caf::expected<ok_atom> r) mutable {
      if (!r) {
        if (recorded != 0)
          c_.flight_->finish(recorded, r.error());
        if (owner && !owner->answered)
          owner->answer(std::move(r.error()));
        return finished();
      }
      held_payload received;
      received.value = std::move(plan->items[0].result);
      if (plan->items.size() > 1)
        received.indices = plan->items[1].result.to_vector<int64_t>();
      restore_payload(op, std::move(received));
      apply_ordered(std::move(op), std::move(owner), std::move(finished),
                    recorded);
    });
}

bool services_ordering::joins_group(const sequenced_operation& op) {
  auto* u = std::get_if<ops::update>(&op.op);
  return u && !op.deferred.present && c_.joins_group_commit(u->variable, u->how);
}

void services_ordering::commit_group() {
  // The run of updates that may share the round, as far as they are here:
  // each with this process's verdict and the time left to it.
  const auto& front = ordered_.front();
  const uint64_t first = front.sequence;
  std::vector<group_commit::entry> stated;
  std::vector<caf::error> local;
  std::vector<caf::timespan> timeouts;
  for (auto& op : ordered_) {
    if (stated.size() == group_commit::max_operations)
      break;
    // The updates before it change no variable's key.
    to_local(op);
    if (!stated.empty()
        && (op.sequence != first + stated.size() || !joins_group(op)))
      break;
    auto& u = std::get<ops::update>(op.op);
    auto& info = *(*c_.find(u.variable))->info;
    const ticket* waiting = nullptr;
    if (op.origin == c_.processes->rank)
      if (auto i = tickets_.find(op.ticket); i != tickets_.end())
        waiting = i->second.get();
    caf::timespan timeout;
    caf::error err = time_left(waiting, "update", timeout);
    if (!err)
      err = c_.update_checks(info, u.how, u.value);
    uint32_t verdict = 0;
    if (err)
      verdict = static_cast<uint32_t>(
        code_of(err) == errc::none ? errc::replica_failed : code_of(err));
    stated.push_back(
      {group_commit::fingerprint_of_update(info.name, u.how, u.value),
       verdict});
    local.push_back(std::move(err));
    timeouts.push_back(timeout);
  }
  // The front update is decided whatever happens: its entry in the flight
  // recorder (M7) follows the round.
  const uint64_t entry
    = c_.record_ordered(front.op, {front.origin, front.sequence, front.epoch});
  std::shared_ptr<collective_plan> plan;
  {
    coordinator_helpers::restore_on_exit scope{c_.flight_now_, entry};
    plan = c_.new_plan("the group of updates from number "
                       + std::to_string(first));
  }
  plan->stated = std::make_shared<collective_plan::statements>();
  plan->stated->mine = group_commit::state(first, stated);
  ++group_rounds_;
  applying_ordered_ = true;
  auto running = std::make_shared<bool>(true);
  const auto round_timeout = timeouts.front();
  c_.run_collective(
    round_timeout, plan,
    [this, plan, first, local = std::move(local),
     timeouts = std::move(timeouts), entry,
     running](caf::expected<ok_atom> r) mutable {
      auto decided = r ? group_commit::decide(first, plan->stated->all)
                       : caf::expected<group_commit::decision>{
                         std::move(r.error())};
      apply_group(std::move(decided), std::move(local), std::move(timeouts),
                  entry, running);
    });
  *running = false;
}

void services_ordering::apply_group(
  caf::expected<group_commit::decision> decided, std::vector<caf::error> local,
  std::vector<caf::timespan> timeouts, uint64_t front_entry,
  std::shared_ptr<bool> running) {
  // A failed round decides the front update alone (it fails everywhere).
  const size_t taken = decided ? decided->taken : 1;
  grouped_updates_ += taken;
  auto left = std::make_shared<size_t>(taken);
  std::function<void()> finished = [this, left, running] {
    if (--*left != 0)
      return;
    applying_ordered_ = false;
    if (!*running)
      run_sequenced();
  };
  for (size_t i = 0; i < taken; ++i) {
    auto op = std::move(ordered_.front());
    ordered_.pop_front();
    last_sequence_ = op.sequence;
    auto& u = std::get<ops::update>(op.op);
    const uint64_t entry
      = i == 0 ? front_entry
               : c_.record_ordered(op.op, {op.origin, op.sequence, op.epoch});
    auto done = turn_reply<ok_atom>(std::shared_ptr<ticket>{take_ticket(op)},
                                    finished);
    if (entry != 0)
      done = coordinator_helpers::closing_flight(c_.flight_, entry,
                                                 std::move(done));
    caf::error err = std::move(local[i]);
    if (!err && !decided)
      err = decided.error();
    else if (!err && decided->outcomes[i].code != 0)
      err = group_commit::failed_elsewhere(
        decided->outcomes[i], std::string{to_string(u.how)} + " of "
                                + c_.quoted_name_of(u.variable));
    if (err) {
      done(std::move(err));
      continue;
    }
    coordinator_helpers::restore_on_exit scope{c_.flight_now_, entry};
    c_.dispatch_update(timeouts[i], u.variable, u.how, std::move(u.value),
                       std::move(done));
  }
}

void services_ordering::lost(caf::error reason) {
  if (sequencer_failure_)
    return;
  // Fenced (P16): this process's own sequencer lost its lead, or another
  // process's did; those words say it better than "cannot be reached".
  sequencer_failure_
    = has_code(reason, errc::fenced) || has_code(reason, errc::replica_failed)
        ? std::move(reason)
        : make_error(errc::replica_failed,
                     "process 0, which orders the cross-replica operations "
                     "of services mode, cannot be reached ("
                       + c_.self_->system().render(reason)
                       + "); cross-replica operations fail from now on");
  log()->error("services mode: {}", varsync::describe(sequencer_failure_));
  // Callers still waiting never get their operation back.
  c_.waits_.fail_barriers(sequencer_failure_);
  auto waiting = std::move(tickets_);
  tickets_.clear();
  for (auto& [number, t] : waiting) {
    if (t->watched)
      c_.deadlines_.unwatch(t->deadline);
    if (!t->answered)
      t->answer(sequencer_failure_);
  }
}

services_ordering::services_ordering(
  coordinator_state& coordinator,
  std::function<void(sequenced_operation)> submit)
  : c_(coordinator), submit_(std::move(submit)) {
}

services_ordering::~services_ordering() {
  // The deadlines of waiting tickets die with the coordinator; their
  // callbacks, dropped unanswered, tell their callers it shut down.
}

size_t services_ordering::in_flight_limit() const {
  return max_in_flight;
}

bool services_ordering::take(caf::timespan timeout, operation& op,
                             completion& done) {
  // An ordered operation runs here when it comes back: never again to the
  // sequencer.
  if (replaying_ || !orders_through_sequencer(op))
    return false;
  sequence(timeout, std::move(op), std::move(done));
  return true;
}

void services_ordering::barrier(caf::timespan, reply_fn<ok_atom> done) {
  // Ordered barriers come back through apply_ordered (arrive_at_barrier);
  // one that runs now is one the sequencer could not take.
  done(sequencer_failure_
         ? sequencer_failure_
         : make_error(errc::invalid_argument,
                      "a barrier of services mode runs in its turn only"));
}

void services_ordering::report(strategy_metrics& m) const {
  m.services_inline_bytes = inline_bytes_;
  m.services_data_plane_bytes = data_plane_bytes_;
  m.services_group_rounds = group_rounds_;
  m.services_grouped_updates = grouped_updates_;
}

void services_ordering::arrive_at_barrier(int origin,
                                          std::shared_ptr<ticket> owner,
                                          std::function<void()> finished) {
  reply_fn<ok_atom> done;
  caf::timespan left = caf::timespan::max();
  if (owner && !owner->answered) {
    if (auto* fn = std::get_if<reply_fn<ok_atom>>(&owner->done)) {
      done = std::move(*fn);
      owner->answered = true;
      if (owner->timeout != caf::timespan::max())
        left = owner->timeout
               - std::chrono::duration_cast<caf::timespan>(
                 operation_deadlines::clock::now() - owner->since);
      if (left < caf::timespan{0})
        left = caf::timespan{0};
    }
  }
  // The turn ends now: the other processes' barriers come after it.
  c_.waits_.set_processes(c_.processes->processes);
  c_.waits_.arrived(origin, std::move(done), left);
  finished();
}

} // namespace varsync
