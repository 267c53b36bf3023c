#pragma once
// The replica actor's state (actors/replica/replica_actor.hpp): it wires the
// replica's parts and owns its mailbox discipline (operations deferred
// while a collective or a waiting step holds the replica, admission V3).
// Internal to the actors layer. The parts:
//   replica_components.hpp  the component store (components, writes, scatters)
//   replica_steps.hpp       the step runner (replica steps, their context)
//   replica_collective.hpp  the collective phases (enter, work, leave) and
//   replica_staging.hpp       the staging buffers they read
//   replica_faults.hpp      test support: injected faults
// The definitions of this class: replica_actor.cpp (the message interface,
// spawning) and replica_operations.cpp (the deferred queue, local
// operations).

#include "actors/replica/replica_actor.hpp"

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <unordered_set>
#include <vector>

#include <caf/typed_event_based_actor.hpp>

#include "actors/replica/replica_collective.hpp"
#include "actors/replica/replica_components.hpp"
#include "actors/replica/replica_faults.hpp"
#include "actors/replica/replica_steps.hpp"
#include "devices/device.hpp"

namespace varsync::replica_internal {

class replica_state final {
public:
  using self_pointer = replica_actor::pointer;

  replica_state(self_pointer self, replica_config cfg,
                std::unique_ptr<varsync::device> dev);

  replica_actor::behavior_type make_behavior();

private:
  // -- the message interface (replica_actor.cpp) -----------------------------

  /// An error unless the current message comes from the coordinator.
  caf::error refuse_unless_coordinator(const char* what) const;
  caf::result<ok_atom> on_create(const shared_variable_info& info,
                                 const tensor& initial);
  caf::result<ok_atom> on_destroy(uint64_t id);
  caf::result<tensor> on_read(uint64_t id);
  caf::result<ok_atom> on_update(uint64_t id, update_op op, const tensor& x);
  caf::result<write_outcomes> on_writes(const component_writes_ptr& batch);
  caf::result<ok_atom> on_split(uint64_t id, const tensor& x);
  caf::result<ok_atom> on_scatter(const recorded_update& u, bool split);
  caf::result<step_report> on_step(uint64_t seq, const replica_step_ptr& step);
  caf::result<step_report> on_step_resume(uint64_t seq,
                                          const std::vector<tensor>& result);
  void on_step_abort(uint64_t seq);
  caf::result<ok_atom> on_step_apply(const std::vector<recorded_update>& ys);
  void on_step_release(uint64_t seq);
  caf::result<int64_t> on_enter(const collective_run_ptr& run);
  caf::result<ok_atom> on_work(const collective_run_ptr& run);
  void on_leave();
  caf::result<tensor> on_local_read(uint64_t id);
  caf::result<ok_atom> on_local_update(uint64_t id, update_op op,
                                       const tensor& x);
  caf::result<ok_atom> on_local_scatter(uint64_t id, scatter_op op,
                                        const indexed_slices& x);
  void on_local_add(uint64_t id, double value);
  void on_resume();

  // -- the deferred queue and local operations (replica_operations.cpp) ------

  /// The one hook of injected faults (test support): counts `operations`
  /// (a batch of writes: one per write); a failing replica exits.
  replica_faults::outcome injected(uint64_t operations = 1) {
    auto f = faults_.on_operations(operations);
    if (f == replica_faults::outcome::failed)
      self_->quit(faults_.failure());
    return f;
  }

  /// An injected delay holds the queue: one deferred operation per delay.
  void schedule_resume() {
    if (faults_.schedule_resume())
      self_->delayed_send(self_, faults_.delay(), resume_atom::value);
  }

  // Runs `f` now, or after the current collective if one is in progress (or
  // after an injected delay).
  template <class T, class F>
  caf::result<T> run_or_defer(F f, uint64_t operations = 1) {
    auto fault = injected(operations);
    if (fault == replica_faults::outcome::failed)
      return caf::result<T>{faults_.failed_error()};
    bool delayed = fault == replica_faults::outcome::delay;
    if (!held() && !delayed && deferred_.empty())
      return caf::result<T>{f()};
    if (delayed)
      schedule_resume();
    auto rp = self_->template make_response_promise<T>();
    deferred_.emplace_back([rp, f = std::move(f)]() mutable {
      caf::expected<T> r = f();
      if (r)
        rp.deliver(std::move(*r));
      else
        rp.deliver(std::move(r.error()));
    });
    return rp;
  }

  // local_add: like run_or_defer, without a reply.
  template <class F>
  void run_or_defer_silently(F f) {
    auto fault = injected();
    if (fault == replica_faults::outcome::failed)
      return;
    bool delayed = fault == replica_faults::outcome::delay;
    if (!held() && !delayed && deferred_.empty())
      return f();
    if (delayed)
      schedule_resume();
    deferred_.emplace_back(std::move(f));
  }

  /// Other operations wait: a collective is in progress, or a step waits
  /// at one.
  bool held() const { return collective_.quiesced() || steps_.step_waiting(); }

  // A local request that would wait behind max_deferred operations is
  // refused (V3): a bound actor cannot grow the replica's queue without
  // limit, and its caller learns at once instead of by a timeout.
  caf::error refuse_if_full() const;

  /// The counts of a metrics snapshot.
  replica_usage usage() const;

  // S3 from an actor bound to the replica (ON_READ, NONE): a replica-context
  // update outside a step.
  caf::expected<ok_atom> local_scatter(uint64_t id, scatter_op op,
                                       const indexed_slices& x);
  caf::expected<ok_atom> local_update(uint64_t id, update_op op,
                                      const tensor& x);

  // A local add has no reply: count what was not applied, and log it once
  // per variable so that a misconfigured caller shows up in the log.
  void drop_local_add(uint64_t id, const caf::error& err);

  /// Runs the deferred operations while the replica is not held.
  void drain();

  // Test support: a delayed replica runs one deferred operation per delay.
  void resume();

  /// This replica's slot in collective plans (its index in this process).
  int slot() const { return cfg_.slot >= 0 ? cfg_.slot : cfg_.rank; }

  self_pointer self_;
  /// Its faults moved to faults_.
  replica_config cfg_;
  replica_faults faults_;
  std::unique_ptr<varsync::device> device_;
  component_store store_;
  collective_phases collective_;
  step_runner steps_;
  /// The sender of the first bind_atom: the strategy's coordinator.
  caf::actor_addr coordinator_;
  std::deque<std::function<void()>> deferred_;
  /// Local requests refused as overloaded (M3).
  mutable uint64_t refusals_ = 0;
  /// Variables whose dropped local adds were logged.
  std::unordered_set<uint64_t> warned_local_add_;
};

} // namespace varsync::replica_internal
