#pragma once
// A replica's step runner: it runs the coordinator's replica steps (plain
// and coroutine steps that wait at in-step collectives, X1-X5), is their
// replica context (reads, updates, device contributions) and builds their
// reports. Local updates of bound actors go through the same access,
// outside a step.

#include <coroutine>
#include <cstdint>
#include <optional>
#include <set>
#include <vector>

#include <caf/error.hpp>
#include <caf/expected.hpp>
#include <caf/fwd.hpp>

#include "actors/replica/replica_components.hpp"
#include "actors/replica/replica_staging.hpp"
#include "varsync/device_id.hpp"
#include "varsync/replica_context.hpp"
#include "varsync/internal/step_report.hpp"
#include "varsync/step_task.hpp"

namespace varsync::replica_internal {

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

class step_runner final : public detail::replica_access {
public:
  /// What the runner needs of the replica's configuration.
  struct settings {
    int rank = 0;
    int num_replicas = 1;
    device_id device;
    on_step_exception step_exception = on_step_exception::stop_replica;
    /// replica_config::collective_checks_device.
    bool collective_checks_device = false;
  };

  /// `self`: the replica actor, which a failing step stops (fail-stop).
  step_runner(caf::scheduled_actor& self, settings cfg, component_store& store,
              staging_buffers& staged)
    : self_(self), cfg_(cfg), store_(store), staged_(staged) {
  }

  step_runner(const step_runner&) = delete;
  step_runner& operator=(const step_runner&) = delete;

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
    return stream_handle{store_.device().native_stream()};
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

  // -- the coordinator's steps (X1-X5) ----------------------------------------

  caf::expected<step_report> run_step(uint64_t seq,
                                      const replica_step_ptr& step);

  /// Step `seq` goes on from its collective with `result` (what waited
  /// behind it is the caller's to run, if it ended).
  caf::expected<step_report> resume_step(uint64_t seq,
                                         std::vector<tensor> result);

  /// The coordinator abandons step `seq` (waiting here, or not started):
  /// true if it ended a step that waited here.
  bool abort_step(uint64_t seq);

  /// A step waits at a collective: the replica serves only the phases of
  /// collectives (which the one it waits for may queue behind) until the
  /// step goes on or is abandoned.
  bool step_waiting() const { return step_ && step_->resume_at; }

private:
  /// An ON_WRITE contribution in this device's memory. Floating variables
  /// with an aggregation keep it on the device (a staging buffer the
  /// collective reads at enter); the others too where the collective checks
  /// V4 and W4 on the device (cfg.collective_checks_device), else their
  /// value is copied to the host for the replicas' checks at enter.
  caf::error contribute_from_device(component& comp, update_op op,
                                    const void* data);

  caf::error record_failure(caf::error err);

  /// Runs one segment of the current step (all of a plain step; a
  /// coroutine step up to its next collective or its end).
  template <class F>
  caf::expected<step_report> run_segment(F&& segment);

  /// The current step is over: its outcome, after releasing what it held.
  /// `own` failures follow the replica's step-exception policy; an abandoned
  /// step is not this replica's failure.
  caf::expected<step_report> end_step(caf::error failure, bool own = true);

  caf::scheduled_actor& self_;
  settings cfg_;
  component_store& store_;
  staging_buffers& staged_;

  step_report* recording_ = nullptr;
  caf::error step_error_;
  /// The coordinator's number of the step running (or last run).
  uint64_t current_step_ = 0;
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
