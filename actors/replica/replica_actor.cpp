// The replica actor: its message interface (make_behavior), each message's
// handler, and spawning. The state behind it is in actors/replica_state.hpp.

#include "actors/append_wakeups.hpp"
#include "actors/replica/replica_state.hpp"
#include "actors/spawn_hidden.hpp"

#include "actors/actor_thread.hpp"
#include "core/logging.hpp"
#include "varsync/error.hpp"

namespace varsync {

namespace replica_internal {

replica_state::replica_state(self_pointer self, replica_config cfg,
                             std::unique_ptr<varsync::device> dev)
  : self_(self), cfg_(std::move(cfg)),
    faults_(std::move(cfg_.faults), cfg_.rank, cfg_.device),
    device_(std::move(dev)),
    store_(*device_, cfg_.rank, cfg_.num_replicas),
    collective_({cfg_.rank, slot(), cfg_.device, cfg_.collective_checks_device},
                store_),
    steps_(*self, {cfg_.rank, cfg_.num_replicas, cfg_.device,
                   cfg_.step_exception, cfg_.collective_checks_device},
           store_, collective_.staged()) {
  if (!cfg_.local_adds_dropped)
    cfg_.local_adds_dropped = std::make_shared<std::atomic<uint64_t>>(0);
}

caf::error replica_state::refuse_unless_coordinator(const char* what) const {
  auto& sender = self_->current_sender();
  if (coordinator_ && sender && sender->address() == coordinator_)
    return {};
  return make_error(errc::invalid_argument,
                    "replica " + std::to_string(cfg_.rank) + " ("
                      + to_string(cfg_.device) + "): " + what
                      + " is accepted only from the strategy's coordinator; "
                        "actors bound to a replica send local_read / "
                        "local_update (replica_of), everything else goes "
                        "through the coordinator (coordinator_of)");
}

replica_actor::behavior_type replica_state::make_behavior() {
  return {
    [this](bind_atom) {
      if (!coordinator_ && self_->current_sender())
        coordinator_ = self_->current_sender()->address();
    },
    [this](component_create_atom, const shared_variable_info& info,
           const tensor& initial) { return on_create(info, initial); },
    [this](component_destroy_atom, uint64_t id) { return on_destroy(id); },
    [this](component_read_atom, uint64_t id) { return on_read(id); },
    [this](component_update_atom, uint64_t id, update_op op,
           const tensor& x) { return on_update(id, op, x); },
    [this](component_writes_atom, const component_writes_ptr& batch) {
      return on_writes(batch);
    },
    [this](component_split_atom, uint64_t id, const tensor& x) {
      return on_split(id, x);
    },
    [this](component_scatter_atom, const recorded_update& u, bool split) {
      return on_scatter(u, split);
    },
    [this](step_atom, uint64_t seq, const replica_step_ptr& step) {
      return on_step(seq, step);
    },
    [this](step_resume_atom, uint64_t seq, const std::vector<tensor>& result) {
      return on_step_resume(seq, result);
    },
    [this](step_abort_atom, uint64_t seq) { on_step_abort(seq); },
    [this](step_apply_atom, const std::vector<recorded_update>& ys) {
      return on_step_apply(ys);
    },
    [this](step_release_atom, uint64_t seq) { on_step_release(seq); },
    [this](collective_enter_atom, const collective_run_ptr& run) {
      return on_enter(run);
    },
    [this](collective_work_atom, const collective_run_ptr& run) {
      return on_work(run);
    },
    [this](collective_leave_atom) { on_leave(); },
    [this](local_read_atom, uint64_t id) { return on_local_read(id); },
    [this](usage_atom) -> caf::result<replica_usage> {
      if (auto err = refuse_unless_coordinator("usage"))
        return err;
      return usage();
    },
    [this](local_update_atom, uint64_t id, update_op op, const tensor& x) {
      return on_local_update(id, op, x);
    },
    [this](local_scatter_atom, uint64_t id, scatter_op op,
           const indexed_slices& slices) {
      return on_local_scatter(id, op, slices);
    },
    [this](local_add_atom, uint64_t id, double value) {
      on_local_add(id, value);
    },
    [this](resume_atom) { on_resume(); },
  };
}

// -- the coordinator's component operations ----------------------------------

caf::result<ok_atom> replica_state::on_create(const shared_variable_info& info,
                                              const tensor& initial) {
  if (auto err = refuse_unless_coordinator("component_create"))
    return err;
  return run_or_defer<ok_atom>(
    [this, info, initial] { return store_.create(info, initial); });
}

caf::result<ok_atom> replica_state::on_destroy(uint64_t id) {
  if (auto err = refuse_unless_coordinator("component_destroy"))
    return err;
  return run_or_defer<ok_atom>([this, id] { return store_.destroy(id); });
}

caf::result<tensor> replica_state::on_read(uint64_t id) {
  if (auto err = refuse_unless_coordinator("component_read"))
    return err;
  return run_or_defer<tensor>([this, id] { return store_.download(id); });
}

caf::result<ok_atom> replica_state::on_update(uint64_t id, update_op op,
                                              const tensor& x) {
  if (auto err = refuse_unless_coordinator("component_update"))
    return err;
  return run_or_defer<ok_atom>(
    [this, id, op, x] { return store_.apply(id, op, x); });
}

caf::result<write_outcomes>
replica_state::on_writes(const component_writes_ptr& batch) {
  if (auto err = refuse_unless_coordinator("component_writes"))
    return err;
  return run_or_defer<write_outcomes>(
    [this, batch] {
      return caf::expected<write_outcomes>{
        store_.apply_writes(*batch, slot() == 0)};
    },
    batch->writes.size());
}

caf::result<ok_atom> replica_state::on_split(uint64_t id, const tensor& x) {
  if (auto err = refuse_unless_coordinator("component_split"))
    return err;
  return run_or_defer<ok_atom>([this, id, x] { return store_.split(id, x); });
}

caf::result<ok_atom> replica_state::on_scatter(const recorded_update& u,
                                               bool split) {
  if (auto err = refuse_unless_coordinator("component_scatter"))
    return err;
  return run_or_defer<ok_atom>(
    [this, u, split] { return store_.apply_scatter(u, split); });
}

// -- steps -------------------------------------------------------------------

caf::result<step_report> replica_state::on_step(uint64_t seq,
                                                const replica_step_ptr& step) {
  if (auto err = refuse_unless_coordinator("step"))
    return err;
  return run_or_defer<step_report>(
    [this, seq, step] { return steps_.run_step(seq, step); });
}

caf::result<step_report>
replica_state::on_step_resume(uint64_t seq, const std::vector<tensor>& result) {
  if (auto err = refuse_unless_coordinator("step_resume"))
    return err;
  auto out = steps_.resume_step(seq, result);
  drain(); // what waited behind the step, if it ended
  return caf::result<step_report>{std::move(out)};
}

void replica_state::on_step_abort(uint64_t seq) {
  if (refuse_unless_coordinator("step_abort"))
    return;
  if (steps_.abort_step(seq))
    drain();
}

caf::result<ok_atom>
replica_state::on_step_apply(const std::vector<recorded_update>& ys) {
  if (auto err = refuse_unless_coordinator("step_apply"))
    return err;
  // A small step's apply is a collective phase: a step waiting here may
  // wait for the collective queued behind it.
  if (steps_.step_waiting() && !collective_.quiesced())
    return caf::result<ok_atom>{store_.apply_step(ys)};
  return run_or_defer<ok_atom>([this, ys] { return store_.apply_step(ys); });
}

void replica_state::on_step_release(uint64_t seq) {
  if (refuse_unless_coordinator("step_release"))
    return;
  // The coordinator is done with step `seq`: after the step itself, which
  // may still wait among the deferred operations.
  auto& staged = collective_.staged();
  if (!collective_.quiesced() && deferred_.empty())
    return staged.release_step(seq, true);
  deferred_.emplace_back([&staged, seq] { staged.release_step(seq, true); });
}

// -- collectives -------------------------------------------------------------

caf::result<int64_t> replica_state::on_enter(const collective_run_ptr& run) {
  if (auto err = refuse_unless_coordinator("collective_enter"))
    return err;
  if (injected() == replica_faults::outcome::failed)
    return faults_.failed_error();
  return caf::result<int64_t>{collective_.enter(*run)};
}

caf::result<ok_atom> replica_state::on_work(const collective_run_ptr& run) {
  if (auto err = refuse_unless_coordinator("collective_work"))
    return err;
  return caf::result<ok_atom>{collective_.work(*run)};
}

void replica_state::on_leave() {
  if (refuse_unless_coordinator("collective_leave"))
    return;
  collective_.leave();
  if (faults_.resume_pending())
    return; // an injected delay releases the deferred operations
  drain();
}

// -- bound actors' local operations ------------------------------------------

caf::result<tensor> replica_state::on_local_read(uint64_t id) {
  if (auto err = refuse_if_full())
    return err;
  return run_or_defer<tensor>([this, id] {
    if (auto c = store_.find(id))
      ++(*c)->reads;
    return store_.download(id);
  });
}

caf::result<ok_atom> replica_state::on_local_update(uint64_t id, update_op op,
                                                    const tensor& x) {
  if (auto err = refuse_if_full())
    return err;
  return run_or_defer<ok_atom>(
    [this, id, op, x] { return local_update(id, op, x); });
}

caf::result<ok_atom> replica_state::on_local_scatter(uint64_t id,
                                                     scatter_op op,
                                                     const indexed_slices& x) {
  if (auto err = refuse_if_full())
    return err;
  return run_or_defer<ok_atom>(
    [this, id, op, x] { return local_scatter(id, op, x); });
}

void replica_state::on_local_add(uint64_t id, double value) {
  if (auto err = refuse_if_full())
    return drop_local_add(id, err);
  run_or_defer_silently([this, id, value] {
    if (auto err = store_.local_add(id, value))
      drop_local_add(id, err);
  });
}

void replica_state::on_resume() {
  auto& sender = self_->current_sender();
  if (sender && sender->address() == self_->address())
    resume();
}

class replica_actor_impl : public replica_actor::base {
public:
  replica_actor_impl(caf::actor_config& cfg, replica_config rc,
                     std::unique_ptr<varsync::device> dev)
    : replica_actor::base(cfg), state_(this, rc, std::move(dev)) {
  }

  behavior_type make_behavior() override { return state_.make_behavior(); }

  // User code runs inside (async callbacks, replica steps): mark the thread
  // so that blocking strategy calls from there fail at once. The actors a
  // replica wakes (its coordinator) queue behind the other replicas
  // (append_wakeups.hpp).
  resume_result resume(caf::execution_unit* ctx, size_t max_throughput) override {
    detail::varsync_actor_scope scope;
    return replica_actor::base::resume(detail::appending_unit_for(ctx),
                                       max_throughput);
  }

private:
  replica_state state_;
};

} // namespace replica_internal

caf::expected<replica_actor> spawn_replica(caf::actor_system& sys,
                                           const replica_config& cfg) {
  auto dev = make_device(cfg.device);
  if (!dev)
    return std::move(dev.error());
  log()->debug("spawning replica {} on {}", cfg.rank, to_string(cfg.device));
  return spawn_maybe_hidden<replica_internal::replica_actor_impl>(
    sys, cfg.hidden, cfg, std::move(*dev));
}

} // namespace varsync
