#include "actors/coordinator_actor.hpp"

#include <atomic>
#include <memory>
#include <string>

#include <caf/actor_system.hpp>
#include <caf/system_messages.hpp>
#include <caf/exit_reason.hpp>
#include <caf/send.hpp>

#include "actors/collective_driver.hpp"
#include "actors/actor_thread.hpp"
#include "actors/coordinator_state.hpp"
#include "actors/replica_actor.hpp"
#include "varsync/error.hpp"
#include "core/logging.hpp"
#include "sync/collective_path.hpp"
#include "sync/distributed_reduce.hpp"

namespace varsync {

namespace {

std::string quote_name(const std::string& s) {
  return "'" + s + "'";
}

// Cross-replica reductions of values up to this size gather copies and
// reduce on the coordinator: constant work, cheaper than a collective.
constexpr size_t gather_threshold_bytes = 4096;

bool small_enough_to_gather(const variable_info& info) {
  return static_cast<size_t>(element_count(info.shape)) * size_of(info.type)
         <= gather_threshold_bytes;
}

// Variable ids are unique in the process, so that a handle of one strategy
// never addresses another strategy's variable.
uint64_t next_variable_id() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

bool is_timeout(const caf::error& err) {
  return err.category() == caf::atom("system")
         && err.code() == static_cast<uint8_t>(caf::sec::request_timeout);
}

} // namespace

coordinator_state::coordinator_state(self_pointer self,
                                     std::vector<device_id> devices,
                                     std::vector<replica_actor> replicas,
                                     caf::timespan default_timeout,
                                     std::optional<collective_driver_actor> driver,
                                     std::string collective,
                                     memory_budget budget,
                                     size_t max_queued_operations,
                                     size_t max_queued_bytes,
                                     std::shared_ptr<std::atomic<uint64_t>>
                                       local_adds_dropped)
  : self_(self),
    devices_(std::move(devices)),
    replicas_(std::move(replicas)),
    driver_(std::move(driver)),
    collective_(std::move(collective)),
    budget_(std::move(budget)),
    replica_failures_(replicas_.size()),
    default_timeout_(default_timeout),
    max_queued_operations_(max_queued_operations),
    max_queued_bytes_(max_queued_bytes),
    local_adds_dropped_(std::move(local_adds_dropped)) {
  if (!local_adds_dropped_)
    local_adds_dropped_ = std::make_shared<std::atomic<uint64_t>>(0);
  if (collective_.empty())
    collective_ = describe_collective(devices_);
}

// -- helpers ------------------------------------------------------------------

caf::expected<coordinator_state::entry*> coordinator_state::find(uint64_t id) {
  auto i = entries_.find(id);
  if (i == entries_.end() || !i->second.ready)
    return make_error(errc::unknown_variable,
                      "no variable with id " + std::to_string(id)
                        + " exists in this strategy (destroyed, or never "
                          "created)");
  return &i->second;
}

caf::error coordinator_state::check_replicas() const {
  for (size_t i = 0; i < replica_failures_.size(); ++i)
    if (replica_failures_[i])
      return make_error(errc::replica_failed,
                        "replica " + std::to_string(i) + " ("
                          + to_string(devices_[i])
                          + ") has failed: " + varsync::describe(replica_failures_[i]));
  return {};
}

caf::error coordinator_state::translate(const caf::error& err,
                                        size_t replica) const {
  if (err.category() == error_category)
    return err;
  auto who = "replica " + std::to_string(replica) + " ("
             + to_string(devices_[replica]) + ")";
  if (is_timeout(err))
    return make_error(errc::timeout,
                      who + " did not answer within the call's deadline");
  return make_error(errc::replica_failed,
                    who + " failed: " + self_->system().render(err));
}

uint64_t coordinator_state::host_copies_bytes(uint64_t nbytes) const {
  uint64_t out = 0;
  for (auto& d : devices_)
    if (d.kind == device_kind::host)
      out = saturating_add(out, host_component_footprint(nbytes));
  return out;
}

template <class T, class Send>
void coordinator_state::gather(size_t count, caf::timespan timeout, Send send,
                               reply_fn<std::vector<T>> done,
                               on_deadline late) {
  struct state final : expirable {
    coordinator_state* owner = nullptr;
    on_deadline late = on_deadline::abandoned;
    std::vector<T> values;
    size_t pending = 0;
    bool finished = false;
    caf::error error;
    reply_fn<std::vector<T>> done;
    operation_deadlines::handle deadline;

    void finish() {
      finished = true;
      if (error)
        done(std::move(error));
      else
        done(std::move(values));
    }

    bool watched = false;

    void finish_one() {
      if (--pending > 0 || finished)
        return;
      if (watched)
        owner->unwatch(deadline);
      finish();
    }

    void expire() override {
      if (finished)
        return;
      auto missing = std::to_string(pending) + " of "
                     + std::to_string(values.size());
      if (late == on_deadline::committed)
        error = make_error(errc::committed_late,
                           "the operation was committed and is applied to "
                           "every live component, but "
                             + missing
                             + " replicas did not confirm it within the "
                               "deadline");
      else
        error = make_error(errc::timeout,
                           missing
                             + " replicas did not answer within the "
                               "deadline; the operation was abandoned before "
                               "its commit point");
      finish();
    }
  };
  if (count == 0) {
    done(std::vector<T>{});
    return;
  }
  auto st = std::make_shared<state>();
  st->owner = this;
  st->late = late;
  st->values.resize(count);
  st->pending = count;
  st->done = std::move(done);
  if (timeout != caf::timespan::max()) { // max: no deadline
    st->deadline = watch(timeout, st.get());
    st->watched = true;
  }
  for (size_t i = 0; i < count; ++i) {
    send(i).then(
      [st, i](T value) {
        st->values[i] = std::move(value);
        st->finish_one();
      },
      [this, st, i](caf::error& err) {
        if (!st->error)
          st->error = translate(err, i);
        st->finish_one();
      });
  }
}

template <class Send>
void coordinator_state::gather_ok(size_t count, caf::timespan timeout,
                                  Send send, reply_fn<ok_atom> done,
                                  on_deadline late) {
  gather<ok_atom>(count, timeout, std::move(send),
                  [done = std::move(done)](caf::expected<std::vector<ok_atom>> r) {
                    if (r)
                      done(ok_atom::value);
                    else
                      done(std::move(r.error()));
                  },
                  late);
}

caf::expected<caf::timespan>
coordinator_state::remaining(caf::timespan timeout, const char* what) const {
  if (timeout == caf::timespan::max() || queued_for_.count() == 0)
    return timeout;
  if (queued_for_ >= timeout)
    return make_error(errc::timeout,
                      std::string{what} + " waited "
                        + std::to_string(std::chrono::duration_cast<
                                           std::chrono::milliseconds>(queued_for_)
                                           .count())
                        + " ms for admission behind other operations, past "
                          "its deadline; it was not started, nothing was "
                          "changed");
  return timeout - queued_for_;
}

void coordinator_state::pending_read::expire() {
  if (finished)
    return;
  finished = true;
  fail(make_error(errc::timeout,
                  "the read waited for writes of the variable that were "
                  "issued before it and are not yet confirmed by every "
                  "replica, past its deadline; nothing was changed"));
}

template <class T>
void coordinator_state::read_after_writes(
  entry& e, caf::timespan timeout, std::function<void(caf::timespan)> rerun,
  reply_fn<T> done) {
  auto w = std::make_shared<pending_read>();
  w->since = operation_deadlines::clock::now();
  w->timeout = timeout;
  w->rerun = std::move(rerun);
  w->fail = [done](caf::error err) { done(std::move(err)); };
  if (timeout != caf::timespan::max()) {
    w->deadline = watch(timeout, w.get());
    w->watched = true;
  }
  e.waiting_reads.push_back(std::move(w));
}

void coordinator_state::write_done(uint64_t id) {
  auto i = entries_.find(id);
  if (i == entries_.end())
    return;
  if (i->second.writes_in_flight > 0 && --i->second.writes_in_flight == 0)
    flush_reads(i->second);
}

void coordinator_state::flush_reads(entry& e) {
  auto reads = std::move(e.waiting_reads);
  e.waiting_reads.clear();
  auto now = operation_deadlines::clock::now();
  for (auto& w : reads) {
    if (w->finished)
      continue;
    w->finished = true;
    if (w->watched)
      unwatch(w->deadline);
    auto left = w->timeout;
    if (left != caf::timespan::max()) {
      auto waited = std::chrono::duration_cast<caf::timespan>(now - w->since);
      if (waited >= left) {
        w->fail(make_error(errc::timeout,
                           "the read waited for earlier writes of the "
                           "variable past its deadline; nothing was "
                           "changed"));
        continue;
      }
      left -= waited;
    }
    w->rerun(left);
  }
}

operation_deadlines::handle coordinator_state::watch(caf::timespan timeout,
                                                     expirable* op) {
  auto deadline = operation_deadlines::clock::now()
                  + std::chrono::duration_cast<
                    operation_deadlines::clock::duration>(timeout);
  auto h = deadlines_.add(deadline, op);
  if (!tick_at_ || deadline < *tick_at_) {
    tick_at_ = deadline;
    auto delay = deadline - operation_deadlines::clock::now();
    if (delay < std::chrono::milliseconds(1))
      delay = std::chrono::milliseconds(1);
    self_->delayed_send(self_, delay, deadline_atom::value);
  }
  return h;
}

void coordinator_state::on_deadline_tick() {
  auto now = operation_deadlines::clock::now();
  if (tick_at_ && *tick_at_ > now)
    return; // an earlier tick that a nearer deadline superseded
  tick_at_.reset();
  deadlines_.expire_due(now);
  if (auto next = deadlines_.next()) {
    tick_at_ = *next;
    auto delay = *next - now;
    if (delay < std::chrono::milliseconds(1))
      delay = std::chrono::milliseconds(1);
    self_->delayed_send(self_, delay, deadline_atom::value);
  }
}

// -- admission -----------------------------------------------------------------

caf::error coordinator_state::refuse_if_full(size_t bytes) const {
  if (in_flight_ < max_in_flight && waiting_.empty())
    return {}; // runs at once
  if (waiting_.size() >= max_queued_operations_)
    return make_error(errc::overloaded,
                      "refused: " + std::to_string(waiting_.size())
                        + " requests already wait for the coordinator "
                          "(max_queued_operations); nothing was changed, "
                          "retry later");
  // A request larger than the bound alone still waits in an empty queue.
  if (!waiting_.empty() && queued_bytes_ + bytes > max_queued_bytes_)
    return make_error(errc::overloaded,
                      "refused: the requests waiting for the coordinator "
                      "hold "
                        + std::to_string(queued_bytes_)
                        + " bytes of tensors (max_queued_bytes "
                        + std::to_string(max_queued_bytes_)
                        + "); nothing was changed, retry later");
  return {};
}

void coordinator_state::release_slot() {
  --in_flight_;
  if (draining_)
    return; // the loop below, further up the stack, starts the next one
  draining_ = true;
  while (in_flight_ < max_in_flight && !waiting_.empty()) {
    auto next = std::move(waiting_.front());
    waiting_.pop_front();
    queued_bytes_ -= next.bytes;
    ++in_flight_;
    queued_for_ = std::chrono::duration_cast<caf::timespan>(
      operation_deadlines::clock::now() - next.since);
    next.run();
    queued_for_ = caf::timespan{0};
  }
  draining_ = false;
}

// -- variables ------------------------------------------------------------------

void coordinator_state::create(caf::timespan timeout, variable_spec spec,
                               reply_fn<variable_info> done) {
  auto left = remaining(timeout, "create");
  if (!left)
    return done(std::move(left.error()));
  timeout = *left;
  auto info = validate_variable_spec(spec);
  if (!info)
    return done(std::move(info.error()));
  if (names_.count(info->name) > 0)
    return done(make_error(errc::already_exists,
                           "a variable named " + quote_name(info->name)
                             + " already exists in this strategy"));
  if (auto err = check_replicas())
    return done(std::move(err));
  // The components' memory is reserved before anything changes: a variable
  // that does not fit is out_of_memory, not a process the kernel kills when
  // the replicas touch their pages. The replicas' allocations take over the
  // count when they reply.
  auto nbytes = spec.initial_value.nbytes();
  auto reserved = host_copies_bytes(nbytes);
  if (auto err = budget_.reserve(
        reserved, "variable " + quote_name(info->name) + " ("
                    + std::to_string(num_replicas()) + " components of "
                    + std::to_string(nbytes) + " bytes)"))
    return done(std::move(err));
  info->id = next_variable_id();
  auto id = info->id;
  names_.emplace(info->name, id);
  entries_.emplace(id, entry{*info, &policy_for(info->sync), false, 0, {}});
  auto initial = std::move(spec.initial_value);
  gather_ok(
    replicas_.size(), timeout,
    [this, info = *info, initial](size_t i) {
      return self_->request(replicas_[i], caf::infinite, component_create_atom::value,
                            info, initial);
    },
    [this, timeout, id, reserved,
     done = std::move(done)](caf::expected<ok_atom> r) {
      memory_budget::release_reserved(reserved);
      auto i = entries_.find(id);
      if (!r) {
        // V2: undo the components that were created.
        for (auto& replica : replicas_)
          self_->request(replica, timeout, component_destroy_atom::value, id)
            .then([](ok_atom) {}, [](caf::error&) {});
        names_.erase(i->second.info.name);
        entries_.erase(i);
        return done(std::move(r.error()));
      }
      i->second.ready = true;
      log()->debug("created variable '{}' (id {})", i->second.info.name, id);
      done(i->second.info);
    });
}

void coordinator_state::lookup(const std::string& name,
                               reply_fn<variable_info> done) {
  auto i = names_.find(name);
  if (i != names_.end()) {
    auto& e = entries_.at(i->second);
    if (e.ready)
      return done(e.info);
  }
  done(make_error(errc::unknown_variable,
                  "no variable named " + quote_name(name)
                    + " exists in this strategy"));
}

void coordinator_state::list(reply_fn<std::vector<variable_info>> done) {
  std::vector<variable_info> out;
  out.reserve(entries_.size());
  for (auto& [id, e] : entries_)
    if (e.ready)
      out.push_back(e.info);
  std::sort(out.begin(), out.end(),
            [](auto& a, auto& b) { return a.name < b.name; });
  done(std::move(out));
}

void coordinator_state::destroy(caf::timespan timeout, uint64_t id,
                                reply_fn<ok_atom> done) {
  auto left = remaining(timeout, "destroy");
  if (!left)
    return done(std::move(left.error()));
  timeout = *left;
  auto e = find(id);
  if (!e)
    return done(std::move(e.error()));
  names_.erase((*e)->info.name);
  // Reads waiting for this variable's writes run again and find it gone.
  auto waiting = std::move((*e)->waiting_reads);
  entries_.erase(id);
  for (auto& w : waiting)
    if (!w->finished) {
      w->finished = true;
      if (w->watched)
        unwatch(w->deadline);
      w->rerun(w->timeout);
    }
  gather_ok(
    replicas_.size(), timeout,
    [this, id](size_t i) {
      return self_->request(replicas_[i], caf::infinite,
                            component_destroy_atom::value, id);
    },
    std::move(done), on_deadline::committed);
}

// -- cross-replica context ------------------------------------------------------

void coordinator_state::read(caf::timespan timeout, uint64_t id,
                             reply_fn<tensor> done) {
  auto left = remaining(timeout, "read");
  if (!left)
    return done(std::move(left.error()));
  timeout = *left;
  auto e = find(id);
  if (!e)
    return done(std::move(e.error()));
  if ((*e)->writes_in_flight > 0)
    return read_after_writes<tensor>(
      **e, timeout,
      [this, id, done](caf::timespan t) { read(t, id, done); }, done);
  auto& info = (*e)->info;
  auto plan = (*e)->policy->cross_replica_read(info, num_replicas());
  if (auto err = check_replicas())
    return done(std::move(err));
  switch (plan.source) {
    case read_source::none:
      return done(std::move(plan.error));
    case read_source::primary:
      gather<tensor>(
        1, timeout,
        [this, id](size_t) {
          return self_->request(replicas_[0], caf::infinite,
                                component_read_atom::value, id);
        },
        [done](caf::expected<std::vector<tensor>> r) {
          if (!r)
            return done(std::move(r.error()));
          done(std::move(r->front()));
        });
      return;
    case read_source::reduce_components:
      break;
  }
  if (small_enough_to_gather(info)) {
    // Small values: one round of copies and a reduction bounded by the
    // threshold beats the three phases of a collective.
    gather<tensor>(
      replicas_.size(), timeout,
      [this, id](size_t i) {
        return self_->request(replicas_[i], caf::infinite,
                              component_read_atom::value, id);
      },
      [op = plan.op, done, name = info.name](
        caf::expected<std::vector<tensor>> r) {
        if (!r)
          return done(std::move(r.error()));
        auto value = reduce_values(op, *r);
        if (!value && has_code(value.error(), errc::overflow))
          return done(make_error(errc::overflow,
                                 "variable '" + name + "': the aggregated "
                                   "read: " + message_of(value.error())));
        done(std::move(value));
      });
    return;
  }
  if (auto err = budget_.check(
        static_cast<uint64_t>(element_count(info.shape)) * size_of(info.type),
        "read of variable " + quote_name(info.name)))
    return done(std::move(err));
  auto collective = std::make_shared<collective_plan>();
  collective->num_replicas = num_replicas();
  auto& item = collective->add_item();
  item.variable_id = id;
  item.type = info.type;
  item.count = element_count(info.shape);
  item.rop = plan.op;
  item.source = collective_source::components;
  item.target = collective_target::output;
  item.result = tensor::empty(info.type, info.shape);
  item.output = item.result.mutable_raw();
  run_collective(timeout, collective,
                 [collective, done, name = info.name](caf::expected<ok_atom> r) {
                   if (!r) {
                     if (has_code(r.error(), errc::overflow))
                       return done(make_error(
                         errc::overflow, "variable '" + name
                                           + "': the aggregated read: "
                                           + message_of(r.error())));
                     return done(std::move(r.error()));
                   }
                   done(std::move(collective->items[0].result));
                 });
}

void coordinator_state::update(caf::timespan timeout, uint64_t id,
                               update_op op, tensor value,
                               reply_fn<ok_atom> done) {
  auto left = remaining(timeout, "update");
  if (!left)
    return done(std::move(left.error()));
  timeout = *left;
  auto e = find(id);
  if (!e)
    return done(std::move(e.error()));
  auto& info = (*e)->info;
  // V4: an op outside the enum would throw in every replica's kernel.
  if (auto err = check_update_op(op, info.name))
    return done(std::move(err));
  if (auto err = validate_value(info, value, to_string(op)))
    return done(std::move(err));
  if (auto err = check_replicas())
    return done(std::move(err));
  // Dispatch is the commit point (V2): from here the update reaches every
  // live component, and reads of the variable wait for its confirmation (W8).
  ++(*e)->writes_in_flight;
  done = [this, id, done = std::move(done)](caf::expected<ok_atom> r) {
    write_done(id);
    done(std::move(r));
  };
  switch ((*e)->policy->cross_replica_update(info, op)) {
    case update_target::every_component:
      if (!is_floating(info.type) && op != update_op::assign
          && replicas_.size() > 1) {
        // V4: components may differ (on_read, none), so one may overflow
        // where the others do not. A collective checks every component at
        // enter, before any is written: all change or none.
        auto plan = std::make_shared<collective_plan>();
        plan->num_replicas = num_replicas();
        auto& item = plan->add_item();
        item.variable_id = id;
        item.type = info.type;
        item.count = element_count(info.shape);
        item.rop = reduce_op::sum;
        item.first_only = true;
        item.uop = op;
        item.source = collective_source::contributions;
        item.target = collective_target::components;
        item.mirrored = info.sync == synchronization::on_write;
        item.contributions.assign(replicas_.size(), value);
        for (size_t r = 0; r < item.contributions.size(); ++r)
          item.inputs[r] = item.contributions[r].raw();
        return run_collective(timeout, plan, std::move(done));
      }
      return gather_ok(
        replicas_.size(), timeout,
        [this, id, op, value](size_t i) {
          return self_->request(replicas_[i], caf::infinite,
                                component_update_atom::value, id, op, value);
        },
        std::move(done), on_deadline::committed);
    case update_target::first_component:
      return gather_ok(
         1, timeout,
        [this, id, op, value](size_t) {
          return self_->request(replicas_[0], caf::infinite,
                                component_update_atom::value, id, op, value);
        },
        std::move(done), on_deadline::committed);
    case update_target::split:
      return gather_ok(
        replicas_.size(), timeout,
        [this, id, value](size_t i) {
          return self_->request(replicas_[i], caf::infinite,
                                component_split_atom::value, id, value);
        },
        std::move(done), on_deadline::committed);
  }
}

void coordinator_state::local_values(caf::timespan timeout, uint64_t id,
                                     reply_fn<std::vector<tensor>> done) {
  auto left = remaining(timeout, "local_values");
  if (!left)
    return done(std::move(left.error()));
  timeout = *left;
  auto e = find(id);
  if (!e)
    return done(std::move(e.error()));
  if ((*e)->writes_in_flight > 0)
    return read_after_writes<std::vector<tensor>>(
      **e, timeout,
      [this, id, done](caf::timespan t) { local_values(t, id, done); }, done);
  if (auto err = check_replicas())
    return done(std::move(err));
  // One host copy of every component.
  auto& info = (*e)->info;
  if (auto err = budget_.check(
        saturating_mul(static_cast<uint64_t>(element_count(info.shape))
                         * size_of(info.type),
                       replicas_.size()),
        "local_values of variable " + quote_name(info.name)))
    return done(std::move(err));
  gather<tensor>(
    replicas_.size(), timeout,
    [this, id](size_t i) {
      return self_->request(replicas_[i], caf::infinite, component_read_atom::value,
                            id);
    },
    std::move(done));
}

void coordinator_state::survivor_values(
  caf::timespan timeout, uint64_t id,
  reply_fn<std::vector<std::optional<tensor>>> done) {
  auto left = remaining(timeout, "survivor_values");
  if (!left)
    return done(std::move(left.error()));
  timeout = *left;
  auto e = find(id);
  if (!e)
    return done(std::move(e.error()));
  if ((*e)->writes_in_flight > 0)
    return read_after_writes<std::vector<std::optional<tensor>>>(
      **e, timeout,
      [this, id, done](caf::timespan t) { survivor_values(t, id, done); },
      done);
  std::vector<size_t> live;
  for (size_t i = 0; i < replicas_.size(); ++i)
    if (!replica_failures_[i])
      live.push_back(i);
  auto n = replicas_.size();
  gather<tensor>(
    live.size(), timeout,
    [this, id, live](size_t k) {
      return self_->request(replicas_[live[k]], caf::infinite,
                            component_read_atom::value, id);
    },
    [n, live, done](caf::expected<std::vector<tensor>> r) {
      if (!r)
        return done(std::move(r.error()));
      std::vector<std::optional<tensor>> out(n);
      for (size_t k = 0; k < live.size(); ++k)
        out[live[k]] = std::move((*r)[k]);
      done(std::move(out));
    });
}

// -- replica steps ----------------------------------------------------------------

void coordinator_state::run(caf::timespan timeout, replica_step_ptr step,
                            reply_fn<ok_atom> done) {
  auto left = remaining(timeout, "run");
  if (!left)
    return done(std::move(left.error()));
  timeout = *left;
  if (!step)
    return done(make_error(errc::invalid_argument, "run: no step function"));
  if (auto err = check_replicas())
    return done(std::move(err));
  gather<step_report>(
    replicas_.size(), timeout,
    [this, step](size_t i) {
      return self_->request(replicas_[i], caf::infinite, step_atom::value, step);
    },
    [this, timeout, done = std::move(done)](
      caf::expected<std::vector<step_report>> reports) mutable {
      if (!reports)
        return done(std::move(reports.error()));
      finish_step(timeout, *reports, std::move(done));
    });
}

void coordinator_state::finish_step(caf::timespan timeout,
                                    std::vector<step_report>& reports,
                                    reply_fn<ok_atom> done) {
  // W6: every replica must issue the same sequence of ON_WRITE updates.
  auto& first = reports[0].updates;
  auto name_of = [this](uint64_t id) {
    auto i = entries_.find(id);
    return i == entries_.end() ? "#" + std::to_string(id)
                               : quote_name(i->second.info.name);
  };
  for (size_t r = 1; r < reports.size(); ++r) {
    auto& mine = reports[r].updates;
    auto n = std::min(first.size(), mine.size());
    for (size_t k = 0; k < n; ++k)
      if (mine[k].variable_id != first[k].variable_id
          || mine[k].op != first[k].op)
        return done(make_error(
          errc::mismatched_replica_updates,
          "update " + std::to_string(k) + " of the step: replica 0 issued "
            + std::string{to_string(first[k].op)} + " on "
            + name_of(first[k].variable_id) + " but replica "
            + std::to_string(r) + " issued "
            + std::string{to_string(mine[k].op)} + " on "
            + name_of(mine[k].variable_id)
            + "; no on_write update of the step was applied"));
    if (mine.size() != first.size())
      return done(make_error(
        errc::mismatched_replica_updates,
        "replica 0 issued " + std::to_string(first.size())
          + " on_write updates in the step but replica " + std::to_string(r)
          + " issued " + std::to_string(mine.size())
          + "; no on_write update of the step was applied"));
  }
  if (first.empty())
    return done(ok_atom::value);
  // V4: reports of remote replicas are checked like any message.
  for (auto& u : first)
    if (!is_valid(u.op)) {
      auto i = entries_.find(u.variable_id);
      return done(check_update_op(
        u.op, i == entries_.end() ? "#" + std::to_string(u.variable_id)
                                  : i->second.info.name));
    }
  // One fused collective applies every update of the step, in issue order.
  auto plan = std::make_shared<collective_plan>();
  plan->num_replicas = num_replicas();
  for (size_t k = 0; k < first.size(); ++k) {
    auto e = find(first[k].variable_id);
    if (!e)
      return done(std::move(e.error()));
    auto rule = (*e)->policy->combine_contributions((*e)->info);
    auto& item = plan->add_item();
    item.variable_id = first[k].variable_id;
    item.type = (*e)->info.type;
    item.count = element_count((*e)->info.shape);
    item.rop = rule.op;
    item.first_only = rule.first_only;
    item.require_equal = rule.require_equal;
    item.uop = first[k].op;
    item.source = collective_source::contributions;
    item.target = collective_target::components;
    item.mirrored = (*e)->info.sync == synchronization::on_write;
    for (auto& report : reports)
      item.contributions.push_back(std::move(report.updates[k].value));
    for (size_t r = 0; r < item.contributions.size(); ++r)
      item.inputs[r] = item.contributions[r].raw();
  }
  run_collective(timeout, plan, std::move(done));
}

void coordinator_state::all_reduce(caf::timespan timeout, reduce_op op,
                                   std::vector<std::vector<tensor>> values,
                                   reply_fn<std::vector<tensor>> done) {
  auto left = remaining(timeout, "all_reduce");
  if (!left)
    return done(std::move(left.error()));
  timeout = *left;
  if (auto err = check_reduce_op(op, "all_reduce"))
    return done(std::move(err));
  auto plan = std::make_shared<collective_plan>();
  plan->num_replicas = num_replicas();
  for (size_t k = 0; k < values.size(); ++k) {
    auto& group = values[k];
    auto where = "all_reduce value " + std::to_string(k);
    if (group.size() != replicas_.size())
      return done(make_error(errc::invalid_argument,
                             where + ": expected "
                               + std::to_string(replicas_.size())
                               + " per-replica values but got "
                               + std::to_string(group.size())));
    for (size_t r = 1; r < group.size(); ++r) {
      if (group[r].type() != group[0].type())
        return done(make_error(errc::dtype_mismatch,
                               where + ": replica " + std::to_string(r)
                                 + " has dtype "
                                 + std::string{to_string(group[r].type())}
                                 + " but replica 0 has "
                                 + std::string{to_string(group[0].type())}));
      if (group[r].shape() != group[0].shape())
        return done(make_error(errc::shape_mismatch,
                               where + ": replica " + std::to_string(r)
                                 + " has shape " + to_string(group[r].shape())
                                 + " but replica 0 has "
                                 + to_string(group[0].shape())));
    }
    if (op == reduce_op::mean && !is_floating(group[0].type()))
      return done(make_error(errc::invalid_argument,
                             where + ": mean of "
                               + std::string{to_string(group[0].type())}
                               + " values needs conversion to float64 first"));
  }
  // The outputs, sized by the caller's values, before any is allocated.
  uint64_t output_bytes = 0;
  for (auto& group : values)
    output_bytes = saturating_add(output_bytes, group[0].nbytes());
  if (auto err = budget_.check(output_bytes,
                               "all_reduce of " + std::to_string(values.size())
                                 + " values"))
    return done(std::move(err));
  for (auto& group : values) {
    auto& item = plan->add_item();
    item.type = group[0].type();
    item.count = group[0].size();
    item.rop = op;
    item.source = collective_source::contributions;
    item.target = collective_target::output;
    item.contributions = std::move(group);
    for (size_t r = 0; r < item.contributions.size(); ++r)
      item.inputs[r] = item.contributions[r].raw();
    item.result = tensor::empty(item.type, item.contributions[0].shape());
    item.output = item.result.mutable_raw();
  }
  if (plan->items.empty())
    return done(std::vector<tensor>{});
  if (auto err = check_replicas())
    return done(std::move(err));
  run_collective(timeout, plan, [plan, done](caf::expected<ok_atom> r) {
    if (!r)
      return done(std::move(r.error()));
    std::vector<tensor> out;
    for (auto& item : plan->items)
      out.push_back(std::move(item.result));
    done(std::move(out));
  });
}

// -- host collectives -----------------------------------------------------------

void coordinator_state::run_collective(caf::timespan timeout,
                                       std::shared_ptr<collective_plan> plan,
                                       reply_fn<ok_atom> done) {
  if (collective_running_) {
    // The deadline runs while the collective waits for the one before it.
    auto since = operation_deadlines::clock::now();
    pending_collectives_.emplace_back(
      [this, since, timeout, plan, done = std::move(done)]() mutable {
        auto left = timeout;
        if (timeout != caf::timespan::max()) {
          auto waited = std::chrono::duration_cast<caf::timespan>(
            operation_deadlines::clock::now() - since);
          if (waited >= timeout) {
            // Not entered: abandoned on every replica, nothing changed.
            done(make_error(errc::timeout,
                            "the collective waited for earlier collectives "
                            "past its deadline; it was not started, nothing "
                            "was changed"));
            return finish_collective();
          }
          left = timeout - waited;
        }
        start_collective(left, std::move(plan), std::move(done));
      });
    return;
  }
  start_collective(timeout, std::move(plan), std::move(done));
}

void coordinator_state::start_collective(caf::timespan timeout,
                                         std::shared_ptr<collective_plan> plan,
                                         reply_fn<ok_atom> done) {
  collective_running_ = true;
  auto leave_and_finish = [this, done](caf::expected<ok_atom> r) {
    if (r)
      ++collectives_run_;
    for (auto& replica : replicas_)
      self_->send(replica, collective_leave_atom::value);
    done(std::move(r));
    finish_collective();
  };
  if (auto err = check_replicas())
    return leave_and_finish(std::move(err));
  if (driver_) // the replicas publish their step-done events at enter
    plan->ready_events.assign(replicas_.size(), nullptr);
  gather<int64_t>(
    replicas_.size(), timeout,
    [this, plan](size_t i) {
      return self_->request(replicas_[i], caf::infinite,
                            collective_enter_atom::value, plan);
    },
    [this, timeout, plan, leave_and_finish](
      caf::expected<std::vector<int64_t>> votes) {
      if (!votes)
        return leave_and_finish(std::move(votes.error()));
      for (size_t r = 0; r < votes->size(); ++r) {
        auto k = (*votes)[r];
        if (k < 0)
          continue;
        auto i = entries_.find(plan->items[static_cast<size_t>(k)].variable_id);
        auto name = i == entries_.end() ? std::string{"?"}
                                        : quote_name(i->second.info.name);
        return leave_and_finish(make_error(
          errc::aggregation_required,
          "variable " + name
            + " has aggregation none, but replica " + std::to_string(r)
            + " contributed a value that differs from replica 0's; give the "
              "variable an aggregation (sum, mean, only_first_replica) or "
              "contribute equal values. No update of the step was applied"));
      }
      // The work phase is memory work that cannot be interrupted halfway:
      // it runs to completion (a dead replica still fails it at once).
      if (driver_) {
        // One place issues the work of every replica (NCCL needs the calls
        // of all local ranks in one group).
        self_->request(*driver_, caf::infinite, collective_work_atom::value,
                       plan)
          .then([leave_and_finish](ok_atom) { leave_and_finish(ok_atom::value); },
                [this, leave_and_finish](caf::error& err) {
                  if (err.category() == error_category)
                    return leave_and_finish(std::move(err));
                  leave_and_finish(make_error(
                    errc::device_error,
                    "the device collective failed: "
                      + self_->system().render(err)));
                });
        return;
      }
      gather_ok(
        replicas_.size(), caf::timespan::max(),
        [this, plan](size_t i) {
          return self_->request(replicas_[i], caf::infinite,
                                collective_work_atom::value, plan);
        },
        leave_and_finish);
    });
}

void coordinator_state::finish_collective() {
  collective_running_ = false;
  if (!pending_collectives_.empty()) {
    auto next = std::move(pending_collectives_.front());
    pending_collectives_.pop_front();
    next();
  }
}

// -- strategy -----------------------------------------------------------------------

strategy_description coordinator_state::describe() const {
  strategy_description out;
  for (auto& d : devices_)
    out.devices.push_back(to_string(d));
  out.collective = collective_;
  out.collectives_run = collectives_run_;
  out.local_adds_dropped = local_adds_dropped_->load();
  for (size_t i = 0; i < replica_failures_.size(); ++i)
    if (replica_failures_[i])
      out.failures.push_back("replica " + std::to_string(i) + " ("
                             + to_string(devices_[i]) + "): "
                             + varsync::describe(replica_failures_[i]));
  return out;
}

void coordinator_state::shutdown() {
  for (auto& replica : replicas_)
    self_->send_exit(replica, caf::exit_reason::user_shutdown);
  if (driver_)
    self_->send_exit(*driver_, caf::exit_reason::user_shutdown);
  self_->quit(caf::exit_reason::user_shutdown);
}

coordinator_internal_actor::behavior_type coordinator_state::make_behavior() {
  for (auto& replica : replicas_) {
    self_->monitor(replica);
    // First message to each replica: from now on it takes component, step
    // and collective messages from this coordinator only.
    self_->send(replica, bind_atom::value);
  }
  self_->set_down_handler([this](caf::down_msg& msg) {
    for (size_t i = 0; i < replicas_.size(); ++i) {
      if (replicas_[i].address() != msg.source)
        continue;
      replica_failures_[i] = msg.reason
                               ? msg.reason
                               : make_error(errc::replica_failed,
                                            "the replica exited");
      log()->error("replica {} ({}) is down: {}", i, to_string(devices_[i]),
                   self_->system().render(replica_failures_[i]));
    }
  });
  // Every request is admitted (see admit) and releases its slot when it
  // delivers its response.
  auto deliver = [this](auto rp) {
    return [this, rp](auto result) mutable {
      release_slot();
      if (result)
        rp.deliver(std::move(*result));
      else
        rp.deliver(std::move(result.error()));
    };
  };
  return {
    [this, deliver](create_atom,
                    variable_spec& spec) -> caf::result<variable_info> {
      auto bytes = spec.initial_value.nbytes();
      if (auto err = refuse_if_full(bytes))
        return err;
      auto rp = self_->make_response_promise<variable_info>();
      admit([this, spec = std::move(spec), d = deliver(rp)]() mutable {
        create(default_timeout_, std::move(spec), std::move(d));
      }, bytes);
      return rp;
    },
    [this, deliver](lookup_atom,
                    const std::string& name) -> caf::result<variable_info> {
      if (auto err = refuse_if_full(0))
        return err;
      auto rp = self_->make_response_promise<variable_info>();
      admit([this, name, d = deliver(rp)]() mutable { lookup(name, d); });
      return rp;
    },
    [this, deliver](list_atom) -> caf::result<std::vector<variable_info>> {
      if (auto err = refuse_if_full(0))
        return err;
      auto rp = self_->make_response_promise<std::vector<variable_info>>();
      admit([this, d = deliver(rp)]() mutable { list(d); });
      return rp;
    },
    [this, deliver](destroy_atom, uint64_t id) -> caf::result<ok_atom> {
      if (auto err = refuse_if_full(0))
        return err;
      auto rp = self_->make_response_promise<ok_atom>();
      admit([this, id, d = deliver(rp)]() mutable {
        destroy(default_timeout_, id, d);
      });
      return rp;
    },
    [this, deliver](read_atom, uint64_t id) -> caf::result<tensor> {
      if (auto err = refuse_if_full(0))
        return err;
      auto rp = self_->make_response_promise<tensor>();
      admit([this, id, d = deliver(rp)]() mutable {
        read(default_timeout_, id, d);
      });
      return rp;
    },
    [this, deliver](update_atom, uint64_t id, update_op op,
                    tensor& value) -> caf::result<ok_atom> {
      auto bytes = value.nbytes();
      if (auto err = refuse_if_full(bytes))
        return err;
      auto rp = self_->make_response_promise<ok_atom>();
      admit([this, id, op, value = std::move(value), d = deliver(rp)]() mutable {
        update(default_timeout_, id, op, std::move(value), d);
      }, bytes);
      return rp;
    },
    [this, deliver](values_atom,
                    uint64_t id) -> caf::result<std::vector<tensor>> {
      if (auto err = refuse_if_full(0))
        return err;
      auto rp = self_->make_response_promise<std::vector<tensor>>();
      admit([this, id, d = deliver(rp)]() mutable {
        local_values(default_timeout_, id, d);
      });
      return rp;
    },
    [this, deliver](run_atom,
                    const replica_step_ptr& step) -> caf::result<ok_atom> {
      if (auto err = refuse_if_full(0))
        return err;
      auto rp = self_->make_response_promise<ok_atom>();
      admit([this, step, d = deliver(rp)]() mutable {
        run(default_timeout_, step, d);
      });
      return rp;
    },
    [this, deliver](allreduce_atom, reduce_op op,
                    std::vector<std::vector<tensor>>& values)
      -> caf::result<std::vector<tensor>> {
      size_t bytes = 0;
      for (auto& row : values)
        for (auto& x : row)
          bytes += x.nbytes();
      if (auto err = refuse_if_full(bytes))
        return err;
      auto rp = self_->make_response_promise<std::vector<tensor>>();
      admit([this, op, values = std::move(values), d = deliver(rp)]() mutable {
        all_reduce(default_timeout_, op, std::move(values), d);
      }, bytes);
      return rp;
    },
    [this](describe_atom) -> caf::result<strategy_description> {
      return describe();
    },
    [this](replicas_atom) -> caf::result<std::vector<replica_actor>> {
      return replicas_;
    },
    [this](client_atom, const client_call_ptr& call) {
      admit([this, call] { call->invoke(*this); });
    },
    [this](shutdown_atom) { shutdown(); },
    [this](deadline_atom) { on_deadline_tick(); },
  };
}

// -- spawning -------------------------------------------------------------------------

namespace {

class coordinator_actor_impl : public coordinator_internal_actor::base {
public:
  coordinator_actor_impl(caf::actor_config& cfg, std::vector<device_id> devices,
                         std::vector<replica_actor> replicas,
                         caf::timespan timeout,
                         std::optional<collective_driver_actor> driver,
                         std::string collective, memory_budget budget,
                         size_t max_queued_operations,
                         size_t max_queued_bytes,
                         std::shared_ptr<std::atomic<uint64_t>> dropped)
    : coordinator_internal_actor::base(cfg),
      state_(this, std::move(devices), std::move(replicas), timeout,
             std::move(driver), std::move(collective), std::move(budget),
             max_queued_operations, max_queued_bytes, std::move(dropped)) {
  }

  behavior_type make_behavior() override { return state_.make_behavior(); }

  // User code runs inside (async callbacks, replica steps): mark the thread
  // so that blocking strategy calls from there fail at once.
  resume_result resume(caf::execution_unit* ctx, size_t max_throughput) override {
    detail::varsync_actor_scope scope;
    return coordinator_internal_actor::base::resume(ctx, max_throughput);
  }

private:
  coordinator_state state_;
};

} // namespace

caf::expected<coordinator_internal_actor> spawn_coordinator(caf::actor_system& sys,
                                                   coordinator_config cfg) {
  if (cfg.devices.empty())
    return make_error(errc::invalid_argument,
                      "a strategy needs at least one device");
  // V4: enums of the config are checked before any replica exists.
  if (static_cast<uint8_t>(cfg.step_exception)
      > static_cast<uint8_t>(on_step_exception::fail_step))
    return make_error(errc::invalid_argument,
                      "step exception policy "
                        + std::to_string(static_cast<int>(cfg.step_exception))
                        + " is not one of 0 (stop_replica), 1 (fail_step)");
  for (auto& d : cfg.devices)
    if ((d.kind != device_kind::host && d.kind != device_kind::cuda)
        || d.index < 0)
      return make_error(errc::invalid_argument,
                        "device kind "
                          + std::to_string(static_cast<int>(d.kind))
                          + " index " + std::to_string(d.index)
                          + " is not a device: kinds are 0 (cpu), 1 (cuda) "
                            "and indices are not negative");
  if (cfg.max_queued_operations == 0 || cfg.max_queued_bytes == 0)
    return make_error(errc::invalid_argument,
                      "the overload bounds must be positive");
  auto dropped = std::make_shared<std::atomic<uint64_t>>(0);
  std::vector<replica_actor> replicas;
  auto stop_all = [&] {
    for (auto& r : replicas)
      caf::anon_send_exit(r, caf::exit_reason::user_shutdown);
  };
  for (size_t i = 0; i < cfg.devices.size(); ++i) {
    for (size_t j = 0; j < i; ++j)
      if (cfg.devices[j] == cfg.devices[i]
          && cfg.devices[i].kind == device_kind::host) {
        stop_all();
        return make_error(errc::invalid_argument,
                          "device " + to_string(cfg.devices[i])
                            + " is listed twice");
      }
    replica_config rc{static_cast<int>(i), static_cast<int>(cfg.devices.size()),
                      cfg.devices[i], {}, cfg.step_exception,
                      cfg.max_queued_operations, dropped};
    for (auto& f : cfg.faults)
      if (f.replica == static_cast<int>(i))
        rc.faults.push_back(f);
    auto replica = spawn_replica(sys, rc);
    if (!replica) {
      stop_all();
      return std::move(replica.error());
    }
    replicas.push_back(std::move(*replica));
  }
  std::optional<collective_driver_actor> driver;
  std::string collective = describe_collective(cfg.devices);
  if (needs_device_collective(cfg.devices)) {
    auto d = spawn_device_collective_driver(sys, cfg.devices);
    if (!d) {
      stop_all();
      return std::move(d.error());
    }
    driver = d->actor;
    collective = d->description;
  }
  auto coordinator = sys.spawn<coordinator_actor_impl>(
    cfg.devices, replicas, cfg.default_timeout, driver, collective,
    memory_budget{cfg.memory_budget_bytes}, cfg.max_queued_operations,
    cfg.max_queued_bytes, dropped);
  // The replicas (and the device collective driver) go down with their
  // coordinator.
  coordinator->attach_functor([replicas, driver](const caf::error&) {
    for (auto& r : replicas)
      caf::anon_send_exit(r, caf::exit_reason::user_shutdown);
    if (driver)
      caf::anon_send_exit(*driver, caf::exit_reason::user_shutdown);
  });
  log()->info("strategy over {} replicas started; collective: {}",
              replicas.size(), collective);
  return coordinator;
}

} // namespace varsync
