#pragma once
// The state of one replica actor (actors/replica_actor.hpp): its components,
// the replica-step access, local operations and its part of collectives.
// Internal to the actors layer; the definitions are split by concern:
//   replica_components.cpp  components, local operations, faults, admission
//   replica_steps.cpp       replica steps and the device staging buffers
//   replica_collective.cpp  enter, leave and the quiesced queue
//   replica_actor.cpp       the message interface and spawning

#include "actors/replica_actor.hpp"

#include <algorithm>
#include <chrono>
#include <deque>
#include <exception>
#include <functional>
#include <memory_resource>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "actors/actor_thread.hpp"
#include "varsync/error.hpp"
#include "core/logging.hpp"
#include "core/small_object_pool.hpp"
#include "devices/device.hpp"
#include "devices/host_kernels.hpp"
#include "sync/collective_algorithm.hpp"
#include "sync/collective_checks.hpp"
#include "sync/sync_policy.hpp"
#include "varsync/replica_context.hpp"

namespace varsync::replica_internal {

inline size_t nbytes_of(const variable_info& info) {
  return static_cast<size_t>(element_count(info.shape)) * size_of(info.type);
}

/// One ON_WRITE contribution kept in the replica's device memory.
struct staging_buffer {
  void* data = nullptr;
  size_t nbytes = 0;
  uint64_t step = 0;     // the coordinator's number of the step that made it
  uint64_t variable = 0; // the variable it was handed out for (0: a copy)
  bool recorded = false; // passed to update_from_device
  tensor host;           // host replicas: the buffer
};

/// A replica's step while it runs or waits at a collective (X2).
struct step_in_progress {
  uint64_t seq = 0;
  replica_step_ptr step;
  step_report report;
  /// A coroutine step's root task (owns its frames).
  step_task<void> root;
  /// Where the step waits; null while it runs.
  std::coroutine_handle<> resume_at;
  step_collective waiting;
  std::vector<tensor> result;
};

struct component {
  /// Shared with the coordinator and the other replicas of the process.
  shared_variable_info info;
  void* data = nullptr;
  /// Replica-context reads and updates that found this component (M1).
  uint64_t reads = 0;
  uint64_t updates = 0;
  /// Derived, not stored: thousands of components per replica are common.
  const sync_policy& policy() const { return policy_for(info->sync); }
};
class replica_state final : public detail::replica_access {
public:
  using self_pointer = replica_actor::pointer;

  replica_state(self_pointer self, replica_config cfg,
                std::unique_ptr<varsync::device> dev)
    : self_(self), cfg_(cfg), device_(std::move(dev)),
      host_memory_(device_->host_accessible()) {
    if (!cfg_.local_adds_dropped)
      cfg_.local_adds_dropped = std::make_shared<std::atomic<uint64_t>>(0);
  }

  ~replica_state() override {
    for (auto& [id, c] : components_)
      device_->release(c.data);
    for (auto& [id, b] : staged_)
      if (b.host.size() == 0 && b.data != nullptr)
        device_->release(b.data);
  }

  replica_actor::behavior_type make_behavior();
  /// An error unless the current message comes from the coordinator.
  caf::error refuse_unless_coordinator(const char* what) const;

  // -- replica_access (replica steps) ----------------------------------------

  int replica_id() const override { return cfg_.rank; }
  int num_replicas() const override { return cfg_.num_replicas; }
  device_id device() const override { return cfg_.device; }

  caf::expected<tensor_view> read(const variable_info& v) override;

  caf::expected<device_view> device_pointer(const variable_info& v) override;
  caf::error scatter(const variable_info& v, scatter_op op,
                     const std::vector<int64_t>& indices,
                     const tensor& values) override;

  stream_handle stream() const override {
    return stream_handle{device_->native_stream()};
  }

  caf::error update_from_device(const variable_info& v, update_op op,
                                const void* data) override;

  caf::expected<device_view>
  contribution_buffer(const variable_info& v) override;

  caf::error update(const variable_info& v, update_op op,
                    const tensor& value) override;

  caf::error update_scalar(const variable_info& v, update_op op,
                           double value) override;

  caf::error update_mirrored(const variable_info& v, update_op op,
                             const tensor& value) override;

  void start_coroutine(step_task<void> root) override;

  void suspend_at(step_collective request, std::coroutine_handle<> at) override;

  std::vector<tensor> take_collective_result() override;

  // -- coroutine steps (X1-X5) -----------------------------------------------

  /// Step `seq` goes on from its collective with `result`.
  caf::expected<step_report> resume_step(uint64_t seq,
                                         std::vector<tensor> result);

  /// The coordinator abandons step `seq` (waiting here, or not started).
  void abort_step(uint64_t seq);

  /// A step waits at a collective: the replica serves only the phases of
  /// collectives (which the one it waits for may queue behind) until the
  /// step goes on or is abandoned.
  bool step_waiting() const { return step_ && step_->resume_at; }

private:
  caf::expected<component*> find(uint64_t id, const std::string& name = {});

  /// An ON_WRITE contribution in this device's memory. Floating variables
  /// with an aggregation keep it on the device (a staging buffer the
  /// collective reads at enter); the others too where the collective checks
  /// V4 and W4 on the device (cfg.collective_checks_device), else their
  /// value is copied to the host for the replicas' checks at enter.
  caf::error contribute_from_device(component& comp, update_op op,
                                    const void* data);

  /// The buffer this step got from contribution_buffer at `data` and has not
  /// passed to update_from_device yet, or staged_.end().
  std::unordered_map<uint64_t, staging_buffer>::iterator
  unrecorded_buffer(const void* data);

  void release_buffer(staging_buffer& b);

  /// Releases the staging buffers of `step`: all of them, or only those the
  /// step did not record (at the end of a step whose report goes out).
  void release_step_buffers(uint64_t step, bool recorded_too);

  // V4: an integer update that does not fit the dtype changes nothing.
  // `y` is host memory unless `y_on_device`; device components (and device
  // values) are copied to the host for the check: integer variables only.
  caf::error check_overflow(const component& comp, update_op op, const void* y,
                            bool y_on_device = false) const;

  /// `data` readable by host code: itself, or a host copy of device memory
  /// (the tensor keeps the copy alive).
  caf::expected<std::pair<tensor, const void*>>
  host_copy(const void* data, dtype type, int64_t n, bool on_device) const;

  caf::error record_failure(caf::error err);

  enum class fault_outcome { none, delay, failed };

  // Test support: counts operations and applies injected faults.
  /// `operations`: what the message counts as (a batch of writes: one
  /// per write).
  fault_outcome inject_faults(uint64_t operations = 1);

  caf::error failed_error() const;

  std::chrono::milliseconds injected_delay() const;

  // A local request that would wait behind max_deferred operations is
  // refused (V3): a bound actor cannot grow the replica's queue without
  // limit, and its caller learns at once instead of by a timeout.
  caf::error refuse_if_full() const;
  /// The counts of a metrics snapshot.
  replica_usage usage() const;

  // Runs `f` now, or after the current collective if one is in progress (or
  // after an injected delay).
  template <class T, class F>
  caf::result<T> run_or_defer(F f, uint64_t operations = 1) {
    auto fault = inject_faults(operations);
    if (fault == fault_outcome::failed)
      return caf::result<T>{failed_error()};
    bool delayed = fault == fault_outcome::delay;
    if (!held() && !delayed && deferred_.empty())
      return caf::result<T>{f()};
    if (delayed && !resume_pending_) {
      resume_pending_ = true;
      self_->delayed_send(self_, injected_delay(), resume_atom::value);
    }
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

  caf::expected<ok_atom> create(const shared_variable_info& info,
                                const tensor& initial);

  caf::expected<ok_atom> destroy(uint64_t id);

  caf::expected<tensor> download(uint64_t id);

  caf::expected<ok_atom> apply(uint64_t id, update_op op, const tensor& x);

  // A small step's combined updates: every check before any change, so that
  // all apply or none (the components are mirrors: every replica decides
  // alike).
  caf::expected<ok_atom> apply_step(const std::vector<recorded_update>& ys);

  caf::expected<ok_atom> split(uint64_t id, const tensor& x);

  /// Cross-replica writes in their order (group commit); each one that
  /// fails changes nothing and leaves the others to apply.
  write_outcomes apply_writes(const component_writes& batch);

  // -- sparse updates (replica_scatter.cpp) -----------------------------------

  /// A cross-replica scatter's rows (u.indices in the kernels' form), to
  /// this component: as they are, or (split) this replica's R4 share of
  /// each.
  caf::expected<ok_atom> apply_scatter(const recorded_update& u, bool split);
  /// Every check of applying scatter rows `u` to `comp`, read-only: rows
  /// in range and in the kernels' form, values shaped for them, no integer overflow or
  /// zero divisor (a device component's touched rows are read for it).
  caf::error check_scatter_rows(const component& comp,
                                const recorded_update& u) const;
  /// check_scatter_rows without the overflow check.
  caf::error check_scatter_shape(const component& comp,
                                 const recorded_update& u) const;
  /// The integer overflow check alone, for rows this replica combined.
  caf::error check_scatter_overflow(const component& comp,
                                    const recorded_update& u) const;
  /// Applies rows, checking V4 on the rows it reads unless `checked`:
  /// host memory in place, device memory through its touched rows only.
  caf::error write_scatter_rows(component& comp, const recorded_update& u,
                                bool checked = false);

  // S3 from an actor bound to the replica (ON_READ, NONE).
  caf::expected<ok_atom> local_scatter(uint64_t id, scatter_op op,
                                       const indexed_slices& x);
  caf::expected<ok_atom> local_update(uint64_t id, update_op op,
                                      const tensor& x);

  // local_add: like run_or_defer, without a reply.
  template <class F>
  void run_or_defer_silently(F f) {
    auto fault = inject_faults();
    if (fault == fault_outcome::failed)
      return;
    bool delayed = fault == fault_outcome::delay;
    if (!held() && !delayed && deferred_.empty())
      return f();
    if (delayed && !resume_pending_) {
      resume_pending_ = true;
      self_->delayed_send(self_, injected_delay(), resume_atom::value);
    }
    deferred_.emplace_back(std::move(f));
  }

  // value + the component, in its dtype. Integers: an add whose result the
  // dtype cannot hold is skipped (an error, never wrapped or saturated).
  caf::error local_add(uint64_t id, double value);

  // A local add has no reply: count what was not applied, and log it once
  // per variable so that a misconfigured caller shows up in the log.
  void drop_local_add(uint64_t id, const caf::error& err);

  caf::expected<step_report> run_step(uint64_t seq,
                                      const replica_step_ptr& step);

  /// Runs one segment of the current step (all of a plain step; a
  /// coroutine step up to its next collective or its end).
  template <class F>
  caf::expected<step_report> run_segment(F&& segment);

  /// The current step is over: its outcome, after releasing what it held.
  /// `own` failures follow the replica's step-exception policy; an abandoned
  /// step is not this replica's failure.
  caf::expected<step_report> end_step(caf::error failure, bool own = true);

  /// Other operations wait: a collective is in progress, or a step waits
  /// at one.
  bool held() const { return quiesced_ || step_waiting(); }

  // Enter: stop serving other requests and publish this replica's pointers.
  caf::expected<int64_t> enter(collective_run& run);

  /// A scatter item's rows fit this replica's component (ascending, in
  /// the kernels' form, in range; host memory).
  caf::error check_plan_rows(const component& comp,
                             const collective_item& item) const;

  /// inputs[rank] = this replica's staging buffer for `item`: one it
  /// recorded, of the item's size, for an item that needs no host check.
  caf::error publish_staged(const collective_item& item, item_buffers& b,
                            size_t rank);

  /// The coordinator is done with step `seq`.
  void release_step(uint64_t seq) {
    release_step_buffers(seq, true);
  }

  void leave();

  void drain();

  // Test support: a delayed replica runs one deferred operation per delay.
  void resume();

  self_pointer self_;
  replica_config cfg_;

  /// This replica's slot in collective plans (its index in this process).
  int slot() const { return cfg_.slot >= 0 ? cfg_.slot : cfg_.rank; }
  std::unique_ptr<varsync::device> device_;
  /// device_->host_accessible(), asked once.
  bool host_memory_ = true;
  /// The sender of the first bind_atom: the strategy's coordinator.
  caf::actor_addr coordinator_;
  /// The nodes of components_ (core/small_object_pool.hpp).
  small_object_pool component_nodes_;
  std::pmr::unordered_map<uint64_t, component> components_{
    &component_nodes_};
  bool quiesced_ = false;
  bool resume_pending_ = false;
  uint64_t operations_ = 0;
  std::deque<std::function<void()>> deferred_;
  /// Local requests refused as overloaded (M3).
  mutable uint64_t refusals_ = 0;
  /// Variables whose dropped local adds were logged.
  std::unordered_set<uint64_t> warned_local_add_;
  step_report* recording_ = nullptr;
  caf::error step_error_;
  /// The coordinator's number of the step running (or last run).
  uint64_t current_step_ = 0;
  /// ON_WRITE contributions in this device's memory, by id: handed out by
  /// contribution_buffer or filled by update_from_device; a recorded one
  /// lives until the coordinator releases its step (step_release).
  std::unordered_map<uint64_t, staging_buffer> staged_;
  uint64_t next_staged_id_ = 1;
  /// Host copies handed out by read() on devices that are not host
  /// accessible, kept until the step returns.
  std::vector<tensor> step_copies_;

  /// The step running, or waiting at a collective (X2).
  std::optional<step_in_progress> step_;
  /// Steps abandoned by the coordinator before they started here.
  std::set<uint64_t> aborted_steps_;
  /// The context every step of this replica sees (a coroutine step keeps
  /// a reference to it across its collectives).
  replica_context ctx_{*this};
};

} // namespace varsync::replica_internal
