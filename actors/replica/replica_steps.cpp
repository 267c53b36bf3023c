// The step runner: the access a step has to its replica (reads, updates,
// device contributions) and running a step.

#include "actors/replica/replica_steps.hpp"

#include <exception>
#include <string>
#include <utility>

#include <caf/scheduled_actor.hpp>

#include "core/op_checks.hpp"
#include "core/logging.hpp"
#include "devices/host_kernels.hpp"
#include "sync/collectives/step_collectives.hpp"
#include "varsync/error.hpp"

namespace varsync::replica_internal {

caf::expected<tensor_view> step_runner::read(const variable_info& v) {
  auto c = store_.find(v.id, v.name);
  if (!c)
    return std::move(c.error());
  auto& comp = **c;
  ++comp.reads;
  if (!store_.host_memory()) {
    // A host copy that lives until the step returns (device_pointer is the
    // zero-copy access on such devices).
    auto copy = store_.device().download(comp.data, comp.info->type, comp.info->shape);
    if (!copy)
      return std::move(copy.error());
    auto& kept = step_copies_.emplace_back(std::move(*copy));
    return tensor_view{comp.info->type, &comp.info->shape, kept.raw(),
                       element_count(comp.info->shape)};
  }
  return tensor_view{comp.info->type, &comp.info->shape, comp.data,
                     element_count(comp.info->shape)};
}

caf::expected<device_view> step_runner::device_pointer(const variable_info& v) {
  auto c = store_.find(v.id, v.name);
  if (!c)
    return std::move(c.error());
  auto& comp = **c;
  return device_view{comp.info->type, &comp.info->shape, comp.data,
                     element_count(comp.info->shape), cfg_.device};
}

caf::error step_runner::update_from_device(const variable_info& v, update_op op,
                                           const void* data) {
  auto c = store_.find(v.id, v.name);
  if (!c)
    return record_failure(std::move(c.error()));
  auto& comp = **c;
  ++comp.updates;
  if (auto err = check_update_op(op, comp.info->name))
    return record_failure(std::move(err));
  if (comp.policy().collective_replica_updates())
    return contribute_from_device(comp, op, data);
  if (auto err = store_.check_overflow(comp, op, data, !store_.host_memory()))
    return record_failure(std::move(err));
  return store_.device().apply_local(comp.data, op, comp.info->type, data,
                              element_count(comp.info->shape));
}

caf::expected<device_view>
step_runner::contribution_buffer(const variable_info& v) {
  auto c = store_.find(v.id, v.name);
  if (!c)
    return std::move(c.error());
  auto& comp = **c;
  if (!comp.policy().collective_replica_updates() || recording_ == nullptr)
    return make_error(errc::invalid_argument,
                      "variable '" + comp.info->name + "' is "
                        + std::string{to_string(comp.info->sync)}
                        + ": contribution_buffer is for on_write variables "
                          "in a replica step (other updates apply in place: "
                          "pass any buffer to update_from_device)");
  auto data = staged_.hand_out(current_step_, *comp.info);
  if (!data)
    return std::move(data.error());
  return device_view{comp.info->type, &comp.info->shape, *data,
                     element_count(comp.info->shape), cfg_.device};
}

caf::error step_runner::update(const variable_info& v, update_op op,
                               const tensor& value) {
  auto c = store_.find(v.id, v.name);
  if (!c)
    return record_failure(std::move(c.error()));
  auto& comp = **c;
  ++comp.updates;
  if (auto err = check_update_op(op, comp.info->name))
    return record_failure(std::move(err));
  if (auto err = validate_value(*comp.info, value, to_string(op)))
    return record_failure(std::move(err));
  if (comp.policy().collective_replica_updates()) {
    if (recording_ == nullptr)
      return make_error(errc::invalid_argument,
                        "variable '" + comp.info->name
                          + "' is on_write: update it in a replica step or "
                            "in cross-replica context");
    recording_->updates.push_back({comp.info->id, op, value});
    return {};
  }
  if (auto err = store_.check_overflow(comp, op, value.raw()))
    return record_failure(std::move(err));
  return store_.device().apply(comp.data, op, value);
}

caf::error step_runner::update_mirrored(const variable_info& v,
                                        update_op op, const tensor& value) {
  auto c = store_.find(v.id, v.name);
  if (!c)
    return record_failure(std::move(c.error()));
  auto& comp = **c;
  ++comp.updates;
  if (!comp.policy().collective_replica_updates() || recording_ == nullptr)
    return record_failure(make_error(
      errc::invalid_argument,
      "variable '" + comp.info->name + "' is "
        + std::string{to_string(comp.info->sync)}
        + ": update_mirrored is for on_write variables in a replica step"));
  if (auto err = check_update_op(op, comp.info->name))
    return record_failure(std::move(err));
  if (auto err = validate_value(*comp.info, value, to_string(op)))
    return record_failure(std::move(err));
  recorded_update u{comp.info->id, op, value};
  u.alike = true;
  recording_->updates.push_back(std::move(u));
  return {};
}

caf::error step_runner::update_scalar(const variable_info& v, update_op op,
                                      double value) {
  auto c = store_.find(v.id, v.name);
  if (!c)
    return record_failure(std::move(c.error()));
  auto& comp = **c;
  ++comp.updates;
  if (auto err = check_update_op(op, comp.info->name))
    return record_failure(std::move(err));
  if (auto err = validate_scalar(*comp.info, value))
    return record_failure(std::move(err));
  if (comp.policy().collective_replica_updates() || !store_.host_memory())
    return update(v, op, tensor::filled(comp.info->type, {}, value));
  // Local update of a host scalar: no tensor, no allocation.
  alignas(8) unsigned char y[8];
  store_double(comp.info->type, y, 0, value);
  if (auto err = store_.check_overflow(comp, op, y))
    return record_failure(std::move(err));
  host::apply_update(op, comp.info->type, comp.data, y, 0, 1);
  return {};
}

caf::error step_runner::contribute_from_device(component& comp, update_op op,
                                               const void* data) {
  if (recording_ == nullptr)
    return make_error(errc::invalid_argument,
                      "variable '" + comp.info->name
                        + "' is on_write: update it in a replica step or "
                          "in cross-replica context");
  auto handed = staged_.unrecorded(data, current_step_);
  if (handed != staged_.end() && handed->second.variable != comp.info->id)
    return record_failure(make_error(
      errc::invalid_argument,
      "variable '" + comp.info->name
        + "': the buffer passed to update_from_device was handed out by "
          "contribution_buffer for another variable (its size and dtype "
          "are that variable's)"));
  if (store_.host_memory() && handed != staged_.end()) {
    // Host replicas: the buffer is a tensor already.
    tensor value = std::move(handed->second.host);
    staged_.erase(handed);
    recording_->updates.push_back({comp.info->id, op, std::move(value)});
    return {};
  }
  const bool stays
    = !store_.host_memory()
      && (cfg_.collective_checks_device
          || (is_floating(comp.info->type)
              && !comp.policy().combine_contributions(*comp.info)
                    .require_equal));
  if (!stays) {
    auto value
      = store_.device().download(data, comp.info->type, comp.info->shape);
    if (!value)
      return record_failure(std::move(value.error()));
    return update(*comp.info, op, *value);
  }
  uint64_t id = 0;
  if (handed != staged_.end()) {
    handed->second.recorded = true;
    id = handed->first;
  } else {
    // Copied on the stream, so the caller may reuse `data` at once.
    auto copy = staged_.record_copy(current_step_, data, nbytes_of(*comp.info));
    if (!copy)
      return record_failure(std::move(copy.error()));
    id = *copy;
  }
  recording_->updates.push_back({comp.info->id, op, tensor{}, id});
  return {};
}

caf::error step_runner::record_failure(caf::error err) {
  if (recording_ != nullptr && !step_error_)
    step_error_ = err;
  return err;
}

namespace {

caf::error thrown(const step_runner::settings& cfg, std::exception_ptr ex) {
  const auto who = "replica " + std::to_string(cfg.rank) + " ("
                   + to_string(cfg.device) + "): the step threw";
  try {
    std::rethrow_exception(ex);
  } catch (const std::exception& e) {
    return make_error(errc::replica_failed, who + ": " + e.what());
  } catch (...) {
    return make_error(errc::replica_failed,
                      who + " a non-standard exception");
  }
}

} // namespace

caf::expected<step_report> step_runner::run_step(uint64_t seq,
                                                 const replica_step_ptr& step) {
  if (aborted_steps_.erase(seq) > 0)
    return make_error(errc::timeout,
                      "replica " + std::to_string(cfg_.rank)
                        + ": the step was abandoned before it started here");
  current_step_ = seq;
  step_.emplace();
  step_->seq = seq;
  step_->step = step;
  step_error_ = caf::error{};
  return run_segment([this, &step] { step->run(ctx_); });
}

template <class F>
caf::expected<step_report> step_runner::run_segment(F&& segment) {
  recording_ = &step_->report;
  caf::error failure;
  try {
    segment();
  } catch (...) {
    failure = thrown(cfg_, std::current_exception());
  }
  recording_ = nullptr;
  auto& root = step_->root;
  if (!failure && root.done() && root.error())
    failure = thrown(cfg_, root.error());
  if (!failure && !step_error_ && root.valid() && !root.done()
      && !step_->resume_at)
    failure = make_error(errc::invalid_argument,
                         "replica " + std::to_string(cfg_.rank)
                           + ": the step suspended without waiting at a "
                             "collective");
  if (!failure && step_->resume_at && !root.valid())
    failure = make_error(errc::invalid_argument,
                         "replica " + std::to_string(cfg_.rank)
                           + ": the step awaited a collective outside a "
                             "coroutine step (return step_task<> from the "
                             "step function)");
  if (!failure && !step_error_ && step_->resume_at) {
    // Waits at a collective: the replica goes back to its mailbox.
    step_report waiting;
    waiting.suspended = true;
    waiting.collective = std::move(step_->waiting);
    return waiting;
  }
  return end_step(std::move(failure));
}

caf::expected<step_report>
step_runner::resume_step(uint64_t seq, std::vector<tensor> result) {
  if (!step_waiting() || step_->seq != seq)
    return make_error(errc::invalid_argument,
                      "replica " + std::to_string(cfg_.rank) + ": step "
                        + std::to_string(seq)
                        + " does not wait at a collective here");
  step_->result = std::move(result);
  auto at = std::exchange(step_->resume_at, {});
  return run_segment([at] { at.resume(); });
}

bool step_runner::abort_step(uint64_t seq) {
  if (step_waiting() && step_->seq == seq) {
    end_step(make_error(errc::replica_failed, "abandoned"), false);
    return true;
  }
  // Not started yet (it waits in the mailbox or among deferred operations).
  if (seq > current_step_)
    aborted_steps_.insert(seq);
  return false;
}

caf::expected<step_report> step_runner::end_step(caf::error failure,
                                                 bool own) {
  const auto seq = step_->seq;
  // The frames first: their locals may refer to the step.
  step_->root = step_task<void>{};
  step_->resume_at = {};
  auto report = std::move(step_->report);
  step_.reset();
  step_copies_.clear();
  // Work the step left on the device's stream (its own kernels, local
  // updates) completes before a collective touches the components: an
  // event the collective waits for (CUDA); nothing on host devices.
  if (auto err = store_.device().mark_step_done(); err && !failure)
    failure = std::move(err);
  // Buffers the step asked for but did not contribute go back now; a
  // failed step's report never reaches a collective.
  staged_.release_step(seq, failure || step_error_);
  if (failure) {
    if (own && cfg_.step_exception == on_step_exception::stop_replica) {
      // Fail-stop: the reply below still goes out, then the replica
      // exits and the coordinator's monitor records why.
      log()->error("{}; the replica stops", message_of(failure));
      self_.quit(failure);
    }
    return failure;
  }
  if (step_error_)
    return std::move(step_error_);
  return report;
}

void step_runner::start_coroutine(step_task<void> root) {
  if (!step_ || step_->root.valid()) {
    record_failure(make_error(errc::invalid_argument,
                              "replica " + std::to_string(cfg_.rank)
                                + ": a coroutine step started outside a "
                                  "step, or twice"));
    return;
  }
  step_->root = std::move(root);
  step_->root.resume();
}

void step_runner::suspend_at(step_collective request,
                             std::coroutine_handle<> at) {
  if (!step_ || step_->resume_at) {
    // Not awaited by this replica's running step: nothing will resume it.
    record_failure(make_error(errc::invalid_argument,
                              "replica " + std::to_string(cfg_.rank)
                                + ": a collective was awaited outside the "
                                  "step's own coroutine"));
    return;
  }
  if (auto err = check_step_request(request, cfg_.num_replicas))
    record_failure(make_error(code_of(err),
                              "replica " + std::to_string(cfg_.rank) + ": "
                                + message_of(err)));
  step_->waiting = std::move(request);
  step_->resume_at = at;
}

std::vector<tensor> step_runner::take_collective_result() {
  if (!step_)
    return {};
  return std::move(step_->result);
}

} // namespace varsync::replica_internal
