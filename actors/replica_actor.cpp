// The replica actor: its message interface (make_behavior) and spawning.
// The state behind it is in actors/replica_state.hpp.

#include "actors/append_wakeups.hpp"
#include "actors/replica_state.hpp"
#include "actors/spawn_hidden.hpp"

namespace varsync {

namespace replica_internal {

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
           const tensor& initial) -> caf::result<ok_atom> {
      if (auto err = refuse_unless_coordinator("component_create"))
        return err;
      return run_or_defer<ok_atom>(
        [this, info, initial] { return create(info, initial); });
    },
    [this](component_destroy_atom, uint64_t id) -> caf::result<ok_atom> {
      if (auto err = refuse_unless_coordinator("component_destroy"))
        return err;
      return run_or_defer<ok_atom>([this, id] { return destroy(id); });
    },
    [this](component_read_atom, uint64_t id) -> caf::result<tensor> {
      if (auto err = refuse_unless_coordinator("component_read"))
        return err;
      return run_or_defer<tensor>([this, id] { return download(id); });
    },
    [this](component_update_atom, uint64_t id, update_op op,
           const tensor& x) -> caf::result<ok_atom> {
      if (auto err = refuse_unless_coordinator("component_update"))
        return err;
      return run_or_defer<ok_atom>(
        [this, id, op, x] { return apply(id, op, x); });
    },
    [this](component_writes_atom,
           const component_writes_ptr& batch) -> caf::result<write_outcomes> {
      if (auto err = refuse_unless_coordinator("component_writes"))
        return err;
      return run_or_defer<write_outcomes>(
        [this, batch] { return caf::expected<write_outcomes>{
                          apply_writes(*batch)}; },
        batch->writes.size());
    },
    [this](component_split_atom, uint64_t id,
           const tensor& x) -> caf::result<ok_atom> {
      if (auto err = refuse_unless_coordinator("component_split"))
        return err;
      return run_or_defer<ok_atom>([this, id, x] { return split(id, x); });
    },
    [this](component_scatter_atom, const recorded_update& u,
           bool split) -> caf::result<ok_atom> {
      if (auto err = refuse_unless_coordinator("component_scatter"))
        return err;
      return run_or_defer<ok_atom>(
        [this, u, split] { return apply_scatter(u, split); });
    },
    [this](step_atom, uint64_t seq,
           const replica_step_ptr& step) -> caf::result<step_report> {
      if (auto err = refuse_unless_coordinator("step"))
        return err;
      return run_or_defer<step_report>(
        [this, seq, step] { return run_step(seq, step); });
    },
    [this](step_resume_atom, uint64_t seq,
           const std::vector<tensor>& result) -> caf::result<step_report> {
      if (auto err = refuse_unless_coordinator("step_resume"))
        return err;
      return caf::result<step_report>{resume_step(seq, result)};
    },
    [this](step_abort_atom, uint64_t seq) {
      if (!refuse_unless_coordinator("step_abort"))
        abort_step(seq);
    },
    [this](step_apply_atom,
           const std::vector<recorded_update>& ys) -> caf::result<ok_atom> {
      if (auto err = refuse_unless_coordinator("step_apply"))
        return err;
      // A small step's apply is a collective phase: a step waiting here may
      // wait for the collective queued behind it.
      if (step_waiting() && !quiesced_)
        return caf::result<ok_atom>{apply_step(ys)};
      return run_or_defer<ok_atom>([this, ys] { return apply_step(ys); });
    },
    [this](step_release_atom, uint64_t seq) {
      if (refuse_unless_coordinator("step_release"))
        return;
      // After the step itself, which may still wait in deferred_.
      if (!quiesced_ && deferred_.empty())
        return release_step(seq);
      deferred_.emplace_back([this, seq] { release_step(seq); });
    },
    [this](collective_enter_atom,
           const collective_run_ptr& run) -> caf::result<int64_t> {
      if (auto err = refuse_unless_coordinator("collective_enter"))
        return err;
      if (inject_faults() == fault_outcome::failed)
        return failed_error();
      return caf::result<int64_t>{enter(*run)};
    },
    [this](collective_work_atom,
           const collective_run_ptr& run) -> caf::result<ok_atom> {
      if (auto err = refuse_unless_coordinator("collective_work"))
        return err;
      if (!run->algorithm || !host_memory_) // a driver does this work
        return make_error(errc::device_error,
                          "replica " + std::to_string(cfg_.rank) + " ("
                            + to_string(cfg_.device)
                            + "): collective work that a driver runs");
      if (auto err = run->algorithm->run(*run->plan, run->buffers, slot(),
                                         run->plan->num_replicas))
        return err;
      return ok_atom::value;
    },
    [this](collective_leave_atom) {
      if (!refuse_unless_coordinator("collective_leave"))
        leave();
    },
    [this](local_read_atom, uint64_t id) -> caf::result<tensor> {
      if (auto err = refuse_if_full())
        return err;
      return run_or_defer<tensor>([this, id] {
        if (auto c = find(id))
          ++(*c)->reads;
        return download(id);
      });
    },
    [this](usage_atom) -> caf::result<replica_usage> {
      if (auto err = refuse_unless_coordinator("usage"))
        return err;
      return usage();
    },
    [this](local_update_atom, uint64_t id, update_op op,
           const tensor& x) -> caf::result<ok_atom> {
      if (auto err = refuse_if_full())
        return err;
      return run_or_defer<ok_atom>(
        [this, id, op, x] { return local_update(id, op, x); });
    },
    [this](local_scatter_atom, uint64_t id, scatter_op op,
           const indexed_slices& slices) -> caf::result<ok_atom> {
      if (auto err = refuse_if_full())
        return err;
      return run_or_defer<ok_atom>([this, id, op, slices] {
        return local_scatter(id, op, slices);
      });
    },
    [this](local_add_atom, uint64_t id, double value) {
      if (auto err = refuse_if_full())
        return drop_local_add(id, err);
      run_or_defer_silently([this, id, value] {
        if (auto err = local_add(id, value))
          drop_local_add(id, err);
      });
    },
    [this](resume_atom) {
      auto& sender = self_->current_sender();
      if (sender && sender->address() == self_->address())
        resume();
    },
  };
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
