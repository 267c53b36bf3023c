#include "actors/replica_actor.hpp"

#include <algorithm>
#include <chrono>
#include <deque>
#include <exception>
#include <functional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "actors/actor_thread.hpp"
#include "varsync/error.hpp"
#include "core/logging.hpp"
#include "devices/device.hpp"
#include "devices/host_kernels.hpp"
#include "sync/allreduce_one_pass.hpp"
#include "sync/collective_plan.hpp"
#include "sync/sync_policy.hpp"
#include "varsync/replica_context.hpp"

namespace varsync {

namespace {

size_t nbytes_of(const variable_info& info) {
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

struct component {
  variable_info info;
  const sync_policy* policy = nullptr;
  void* data = nullptr;
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

  caf::expected<tensor_view> read(const variable_info& v) override {
    auto c = find(v.id, v.name);
    if (!c)
      return std::move(c.error());
    auto& comp = **c;
    if (!host_memory_) {
      // A host copy that lives until the step returns (device_pointer is the
      // zero-copy access on such devices).
      auto copy = device_->download(comp.data, comp.info.type, comp.info.shape);
      if (!copy)
        return std::move(copy.error());
      auto& kept = step_copies_.emplace_back(std::move(*copy));
      return tensor_view{comp.info.type, &comp.info.shape, kept.raw(),
                         element_count(comp.info.shape)};
    }
    return tensor_view{comp.info.type, &comp.info.shape, comp.data,
                       element_count(comp.info.shape)};
  }

  caf::expected<device_view> device_pointer(const variable_info& v) override {
    auto c = find(v.id, v.name);
    if (!c)
      return std::move(c.error());
    auto& comp = **c;
    return device_view{comp.info.type, &comp.info.shape, comp.data,
                       element_count(comp.info.shape), cfg_.device};
  }

  stream_handle stream() const override {
    return stream_handle{device_->native_stream()};
  }

  caf::error update_from_device(const variable_info& v, update_op op,
                                const void* data) override {
    auto c = find(v.id, v.name);
    if (!c)
      return record_failure(std::move(c.error()));
    auto& comp = **c;
    if (auto err = check_update_op(op, comp.info.name))
      return record_failure(std::move(err));
    if (comp.policy->collective_replica_updates())
      return contribute_from_device(comp, op, data);
    if (auto err = check_overflow(comp, op, data, !host_memory_))
      return record_failure(std::move(err));
    return device_->apply_local(comp.data, op, comp.info.type, data,
                                element_count(comp.info.shape));
  }

  caf::expected<device_view>
  contribution_buffer(const variable_info& v) override {
    auto c = find(v.id, v.name);
    if (!c)
      return std::move(c.error());
    auto& comp = **c;
    if (!comp.policy->collective_replica_updates() || recording_ == nullptr)
      return make_error(errc::invalid_argument,
                        "variable '" + comp.info.name + "' is "
                          + std::string{to_string(comp.info.sync)}
                          + ": contribution_buffer is for on_write variables "
                            "in a replica step (other updates apply in place: "
                            "pass any buffer to update_from_device)");
    staging_buffer b;
    b.step = current_step_;
    b.variable = comp.info.id;
    b.nbytes = nbytes_of(comp.info);
    if (host_memory_) {
      b.host = tensor::empty(comp.info.type, comp.info.shape);
      b.data = b.host.mutable_raw();
    } else {
      auto mem = device_->allocate(b.nbytes);
      if (!mem)
        return std::move(mem.error());
      b.data = *mem;
    }
    void* data = b.data;
    staged_.emplace(next_staged_id_++, std::move(b));
    return device_view{comp.info.type, &comp.info.shape, data,
                       element_count(comp.info.shape), cfg_.device};
  }

  caf::error update(const variable_info& v, update_op op,
                    const tensor& value) override {
    auto c = find(v.id, v.name);
    if (!c)
      return record_failure(std::move(c.error()));
    auto& comp = **c;
    if (auto err = check_update_op(op, comp.info.name))
      return record_failure(std::move(err));
    if (auto err = validate_value(comp.info, value, to_string(op)))
      return record_failure(std::move(err));
    if (comp.policy->collective_replica_updates()) {
      if (recording_ == nullptr)
        return make_error(errc::invalid_argument,
                          "variable '" + comp.info.name
                            + "' is on_write: update it in a replica step or "
                              "in cross-replica context");
      recording_->updates.push_back({comp.info.id, op, value});
      return {};
    }
    if (auto err = check_overflow(comp, op, value.raw()))
      return record_failure(std::move(err));
    return device_->apply(comp.data, op, value);
  }

  caf::error update_scalar(const variable_info& v, update_op op,
                           double value) override {
    auto c = find(v.id, v.name);
    if (!c)
      return record_failure(std::move(c.error()));
    auto& comp = **c;
    if (auto err = check_update_op(op, comp.info.name))
      return record_failure(std::move(err));
    if (auto err = validate_scalar(comp.info, value))
      return record_failure(std::move(err));
    if (comp.policy->collective_replica_updates() || !host_memory_)
      return update(v, op, tensor::filled(comp.info.type, {}, value));
    // Local update of a host scalar: no tensor, no allocation.
    alignas(8) unsigned char y[8];
    store_double(comp.info.type, y, 0, value);
    if (auto err = check_overflow(comp, op, y))
      return record_failure(std::move(err));
    host::apply_update(op, comp.info.type, comp.data, y, 0, 1);
    return {};
  }

private:
  caf::expected<component*> find(uint64_t id, const std::string& name = {}) {
    auto i = components_.find(id);
    if (i == components_.end())
      return make_error(errc::unknown_variable,
                        "replica " + std::to_string(cfg_.rank)
                          + " holds no component of variable "
                          + (name.empty() ? "#" + std::to_string(id)
                                          : "'" + name + "'"));
    return &i->second;
  }

  /// An ON_WRITE contribution in this device's memory. Floating variables
  /// with an aggregation keep it on the device (a staging buffer the
  /// collective reads at enter); the others are checked on the host (V4's
  /// overflow check, W4's equality), so their value is copied there.
  caf::error contribute_from_device(component& comp, update_op op,
                                    const void* data) {
    if (recording_ == nullptr)
      return make_error(errc::invalid_argument,
                        "variable '" + comp.info.name
                          + "' is on_write: update it in a replica step or "
                            "in cross-replica context");
    auto handed = unrecorded_buffer(data);
    if (handed != staged_.end() && handed->second.variable != comp.info.id)
      return record_failure(make_error(
        errc::invalid_argument,
        "variable '" + comp.info.name
          + "': the buffer passed to update_from_device was handed out by "
            "contribution_buffer for another variable (its size and dtype "
            "are that variable's)"));
    if (host_memory_ && handed != staged_.end()) {
      // Host replicas: the buffer is a tensor already.
      tensor value = std::move(handed->second.host);
      staged_.erase(handed);
      recording_->updates.push_back({comp.info.id, op, std::move(value)});
      return {};
    }
    const bool stays = !host_memory_ && is_floating(comp.info.type)
                       && !comp.policy->combine_contributions(comp.info)
                             .require_equal;
    if (!stays) {
      auto value = device_->download(data, comp.info.type, comp.info.shape);
      if (!value)
        return record_failure(std::move(value.error()));
      return update(comp.info, op, *value);
    }
    uint64_t id = 0;
    if (handed != staged_.end()) {
      handed->second.recorded = true;
      id = handed->first;
    } else {
      // Copied on the stream, so the caller may reuse `data` at once.
      staging_buffer b;
      b.step = current_step_;
      b.nbytes = nbytes_of(comp.info);
      b.recorded = true;
      auto mem = device_->allocate(b.nbytes);
      if (!mem)
        return record_failure(std::move(mem.error()));
      b.data = *mem;
      if (auto err = device_->copy_local(b.data, data, b.nbytes)) {
        device_->release(b.data);
        return record_failure(std::move(err));
      }
      id = next_staged_id_++;
      staged_.emplace(id, std::move(b));
    }
    recording_->updates.push_back({comp.info.id, op, tensor{}, id});
    return {};
  }

  /// The buffer this step got from contribution_buffer at `data` and has not
  /// passed to update_from_device yet, or staged_.end().
  std::unordered_map<uint64_t, staging_buffer>::iterator
  unrecorded_buffer(const void* data) {
    for (auto i = staged_.begin(); i != staged_.end(); ++i)
      if (i->second.data == data && !i->second.recorded
          && i->second.step == current_step_)
        return i;
    return staged_.end();
  }

  void release_buffer(staging_buffer& b) {
    if (!host_memory_ && b.data != nullptr)
      device_->release(b.data);
    b.data = nullptr;
  }

  /// Releases the staging buffers of `step`: all of them, or only those the
  /// step did not record (at the end of a step whose report goes out).
  void release_step_buffers(uint64_t step, bool recorded_too) {
    for (auto i = staged_.begin(); i != staged_.end();) {
      if (i->second.step == step && (recorded_too || !i->second.recorded)) {
        release_buffer(i->second);
        i = staged_.erase(i);
      } else {
        ++i;
      }
    }
  }

  // V4: an integer update that does not fit the dtype changes nothing.
  // `y` is host memory unless `y_on_device`; device components (and device
  // values) are copied to the host for the check: integer variables only.
  caf::error check_overflow(const component& comp, update_op op, const void* y,
                            bool y_on_device = false) const {
    if (op == update_op::assign || is_floating(comp.info.type))
      return {};
    const int64_t n = element_count(comp.info.shape);
    auto staged_c = host_copy(comp.data, comp.info.type, n, !host_memory_);
    if (!staged_c)
      return std::move(staged_c.error());
    auto staged_y = host_copy(y, comp.info.type, n, y_on_device);
    if (!staged_y)
      return std::move(staged_y.error());
    const void* inputs[] = {staged_y->second};
    auto i = host::first_overflow(reduce_op::sum, op, comp.info.type, inputs,
                                  staged_c->second, 0, n);
    if (i < 0)
      return {};
    return make_error(errc::overflow,
                      "variable '" + comp.info.name + "': "
                        + std::string{to_string(op)} + " overflows "
                        + std::string{to_string(comp.info.type)}
                        + " at element " + std::to_string(i) + " on replica "
                        + std::to_string(cfg_.rank) + "; nothing was changed");
  }

  /// `data` readable by host code: itself, or a host copy of device memory
  /// (the tensor keeps the copy alive).
  caf::expected<std::pair<tensor, const void*>>
  host_copy(const void* data, dtype type, int64_t n, bool on_device) const {
    if (!on_device)
      return std::make_pair(tensor{}, data);
    auto t = device_->download(data, type, tensor_shape{n});
    if (!t)
      return std::move(t.error());
    const void* raw = t->raw();
    return std::make_pair(std::move(*t), raw);
  }

  caf::error record_failure(caf::error err) {
    if (recording_ != nullptr && !step_error_)
      step_error_ = err;
    return err;
  }

  enum class fault_outcome { none, delay, failed };

  // Test support: counts operations and applies injected faults.
  fault_outcome inject_faults() {
    if (cfg_.faults.empty())
      return fault_outcome::none;
    ++operations_;
    auto outcome = fault_outcome::none;
    for (auto& f : cfg_.faults) {
      if (operations_ < f.at_operation)
        continue;
      if (f.what == replica_fault::kind::fail) {
        log()->warn("replica {} ({}): {} at operation {}", cfg_.rank,
                    to_string(cfg_.device), f.reason, operations_);
        self_->quit(make_error(errc::device_error,
                               "replica " + std::to_string(cfg_.rank) + " ("
                                 + to_string(cfg_.device) + "): " + f.reason));
        return fault_outcome::failed;
      }
      outcome = fault_outcome::delay;
    }
    return outcome;
  }

  caf::error failed_error() const {
    return make_error(errc::replica_failed,
                      "replica " + std::to_string(cfg_.rank) + " ("
                        + to_string(cfg_.device) + ") has failed");
  }

  std::chrono::milliseconds injected_delay() const {
    std::chrono::milliseconds d{0};
    for (auto& f : cfg_.faults)
      if (f.what == replica_fault::kind::delay && operations_ >= f.at_operation)
        d = std::max(d, f.delay);
    return d;
  }

  // A local request that would wait behind max_deferred operations is
  // refused (V3): a bound actor cannot grow the replica's queue without
  // limit, and its caller learns at once instead of by a timeout.
  caf::error refuse_if_full() const {
    if (deferred_.size() < cfg_.max_deferred)
      return {};
    return make_error(errc::overloaded,
                      "replica " + std::to_string(cfg_.rank) + " ("
                        + to_string(cfg_.device) + "): refused, "
                        + std::to_string(deferred_.size())
                        + " operations already wait (max_queued_operations); "
                          "nothing was changed, retry later");
  }

  // Runs `f` now, or after the current collective if one is in progress (or
  // after an injected delay).
  template <class T, class F>
  caf::result<T> run_or_defer(F f) {
    auto fault = inject_faults();
    if (fault == fault_outcome::failed)
      return caf::result<T>{failed_error()};
    bool delayed = fault == fault_outcome::delay;
    if (!quiesced_ && !delayed && deferred_.empty())
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

  caf::expected<ok_atom> create(const variable_info& info,
                                const tensor& initial) {
    if (components_.count(info.id) > 0)
      return make_error(errc::already_exists,
                        "replica " + std::to_string(cfg_.rank)
                          + " already holds variable '" + info.name + "'");
    if (auto err = validate_value(info, initial, "initial value"))
      return err;
    auto mem = device_->allocate(initial.nbytes());
    if (!mem)
      return std::move(mem.error());
    if (auto err = device_->upload(*mem, initial)) {
      device_->release(*mem);
      return err;
    }
    components_.emplace(info.id,
                        component{info, &policy_for(info.sync), *mem});
    return ok_atom::value;
  }

  caf::expected<ok_atom> destroy(uint64_t id) {
    auto i = components_.find(id);
    if (i != components_.end()) {
      device_->release(i->second.data);
      components_.erase(i);
    }
    return ok_atom::value;
  }

  caf::expected<tensor> download(uint64_t id) {
    auto c = find(id);
    if (!c)
      return std::move(c.error());
    return device_->download((*c)->data, (*c)->info.type, (*c)->info.shape);
  }

  caf::expected<ok_atom> apply(uint64_t id, update_op op, const tensor& x) {
    auto c = find(id);
    if (!c)
      return std::move(c.error());
    if (auto err = check_update_op(op, (*c)->info.name))
      return err;
    if (auto err = validate_value((*c)->info, x, to_string(op)))
      return err;
    if (auto err = check_overflow(**c, op, x.raw()))
      return err;
    if (auto err = device_->apply((*c)->data, op, x))
      return err;
    return ok_atom::value;
  }

  // A small step's combined updates: every check before any change, so that
  // all apply or none (the components are mirrors: every replica decides
  // alike).
  caf::expected<ok_atom> apply_step(const std::vector<recorded_update>& ys) {
    std::vector<component*> comps;
    comps.reserve(ys.size());
    for (auto& y : ys) {
      auto c = find(y.variable_id);
      if (!c)
        return std::move(c.error());
      if (auto err = check_update_op(y.op, (*c)->info.name))
        return err;
      if (y.staged != 0)
        return make_error(errc::invalid_argument,
                          "replica " + std::to_string(cfg_.rank)
                            + ": a small step's update names a staging "
                              "buffer");
      if (auto err = validate_value((*c)->info, y.value, to_string(y.op)))
        return err;
      if (auto err = check_overflow(**c, y.op, y.value.raw()))
        return make_error(errc::overflow,
                          message_of(err) + " (no update of the step was "
                                            "applied)");
      comps.push_back(*c);
    }
    for (size_t k = 0; k < ys.size(); ++k)
      if (auto err = device_->apply(comps[k]->data, ys[k].op, ys[k].value))
        return err;
    return ok_atom::value;
  }

  caf::expected<ok_atom> split(uint64_t id, const tensor& x) {
    auto c = find(id);
    if (!c)
      return std::move(c.error());
    if (auto err = validate_value((*c)->info, x, "assign"))
      return err;
    if (auto err = device_->split_assign((*c)->data, x, cfg_.rank,
                                         cfg_.num_replicas))
      return err;
    return ok_atom::value;
  }

  caf::expected<ok_atom> local_update(uint64_t id, update_op op,
                                      const tensor& x) {
    auto c = find(id);
    if (!c)
      return std::move(c.error());
    if (auto err = update((*c)->info, op, x))
      return err;
    return ok_atom::value;
  }

  // local_add: like run_or_defer, without a reply.
  template <class F>
  void run_or_defer_silently(F f) {
    auto fault = inject_faults();
    if (fault == fault_outcome::failed)
      return;
    bool delayed = fault == fault_outcome::delay;
    if (!quiesced_ && !delayed && deferred_.empty())
      return f();
    if (delayed && !resume_pending_) {
      resume_pending_ = true;
      self_->delayed_send(self_, injected_delay(), resume_atom::value);
    }
    deferred_.emplace_back(std::move(f));
  }

  // value + the component, in its dtype. Integers: an add whose result the
  // dtype cannot hold is skipped (an error, never wrapped or saturated).
  caf::error local_add(uint64_t id, double value) {
    auto c = find(id);
    if (!c)
      return std::move(c.error());
    auto& comp = **c;
    if (comp.policy->collective_replica_updates())
      return make_error(errc::invalid_argument,
                        "variable '" + comp.info.name
                          + "' is on_write: local_add applies to on_read and "
                            "none variables only");
    if (auto err = validate_scalar(comp.info, value))
      return err;
    if (!host_memory_) { // device memory: one small upload
      auto x = tensor::filled(comp.info.type, {}, value);
      if (auto err = check_overflow(comp, update_op::assign_add, x.raw()))
        return make_error(errc::invalid_argument,
                          message_of(err) + " (local_add skipped)");
      return device_->apply(comp.data, update_op::assign_add, x);
    }
    auto overflow = [&] {
      return make_error(errc::invalid_argument,
                        "variable '" + comp.info.name + "': adding "
                          + std::to_string(value) + " overflows "
                          + std::string{to_string(comp.info.type)}
                          + "; the add was skipped");
    };
    if (comp.info.type == dtype::int32) {
      auto* x = static_cast<int32_t*>(comp.data);
      int32_t sum = 0;
      if (__builtin_add_overflow(*x, static_cast<int32_t>(value), &sum))
        return overflow();
      *x = sum;
      return {};
    }
    if (comp.info.type == dtype::int64) {
      auto* x = static_cast<int64_t*>(comp.data);
      int64_t sum = 0;
      if (__builtin_add_overflow(*x, static_cast<int64_t>(value), &sum))
        return overflow();
      *x = sum;
      return {};
    }
    alignas(8) unsigned char y[8];
    store_double(comp.info.type, y, 0, value);
    host::apply_update(update_op::assign_add, comp.info.type, comp.data, y, 0,
                       1);
    return {};
  }

  // A local add has no reply: count what was not applied, and log it once
  // per variable so that a misconfigured caller shows up in the log.
  void drop_local_add(uint64_t id, const caf::error& err) {
    cfg_.local_adds_dropped->fetch_add(1, std::memory_order_relaxed);
    if (warned_local_add_.insert(id).second)
      log()->warn("replica {} ({}): local_add of variable #{} not applied "
                  "(further ones are only counted in local_adds_dropped): {}",
                  cfg_.rank, to_string(cfg_.device), id, describe(err));
  }

  caf::expected<step_report> run_step(uint64_t seq,
                                      const replica_step_ptr& step) {
    step_report report;
    current_step_ = seq;
    recording_ = &report;
    step_error_ = caf::error{};
    replica_context ctx{*this};
    caf::error failure;
    try {
      step->run(ctx);
    } catch (const std::exception& ex) {
      failure = make_error(errc::replica_failed,
                           "replica " + std::to_string(cfg_.rank) + " ("
                             + to_string(cfg_.device)
                             + "): the step threw: " + ex.what());
    } catch (...) {
      failure = make_error(errc::replica_failed,
                           "replica " + std::to_string(cfg_.rank) + " ("
                             + to_string(cfg_.device)
                             + "): the step threw a non-standard exception");
    }
    recording_ = nullptr;
    step_copies_.clear();
    // Work the step left on the device's stream (its own kernels, local
    // updates) completes before a collective touches the components: an
    // event the collective waits for (CUDA); nothing on host devices.
    if (auto err = device_->mark_step_done(); err && !failure)
      failure = std::move(err);
    // Buffers the step asked for but did not contribute go back now; a
    // failed step's report never reaches a collective.
    release_step_buffers(seq, failure || step_error_);
    if (failure) {
      if (cfg_.step_exception == on_step_exception::stop_replica) {
        // Fail-stop: the reply below still goes out, then the replica
        // exits and the coordinator's monitor records why.
        log()->error("{}; the replica stops", message_of(failure));
        self_->quit(failure);
      }
      return failure;
    }
    if (step_error_)
      return std::move(step_error_);
    return report;
  }

  // Enter: stop serving other requests and publish this replica's pointers.
  caf::expected<int64_t> enter(collective_plan& plan) {
    quiesced_ = true;
    auto rank = static_cast<size_t>(slot());
    if (rank < plan.ready_events.size())
      plan.ready_events[rank] = device_->step_done_event();
    int64_t mismatch = -1;
    for (size_t i = 0; i < plan.items.size(); ++i) {
      auto& item = plan.items[i];
      bool uses_component = item.source == collective_source::components
                            || item.target == collective_target::components;
      if (uses_component) {
        auto c = find(item.variable_id);
        if (!c)
          return std::move(c.error());
        if (item.source == collective_source::components)
          item.inputs[rank] = (*c)->data;
        if (item.target == collective_target::components)
          item.components[rank] = (*c)->data;
      }
      if (rank < item.staged.size() && item.staged[rank] != 0)
        if (auto err = publish_staged(item, rank))
          return err;
      if (item.require_equal && mismatch < 0 && !inputs_equal(item, slot()))
        mismatch = static_cast<int64_t>(i);
    }
    // V4: every replica checks its own component before any worker writes,
    // so an integer overflow anywhere fails the collective with nothing
    // changed. A device component is copied to the host for the check
    // (integer items only). Across processes the collective checks once the
    // reduction is global (sync/cross_process_collective.hpp).
    if (mismatch < 0 && !plan.cross_process) {
      caf::error copy_failed;
      std::vector<tensor> copies; // device components only
      auto component_of = [&](const collective_item& item) -> const void* {
        if (host_memory_)
          return item.components[rank];
        auto c = host_copy(item.components[rank], item.type, item.count, true);
        if (!c) {
          copy_failed = std::move(c.error());
          return nullptr;
        }
        copies.push_back(std::move(c->first));
        return c->second;
      };
      auto k = enter_overflow(plan, component_of);
      if (copy_failed)
        return copy_failed;
      if (k >= 0) {
        auto& item = plan.items[static_cast<size_t>(k)];
        auto c = find(item.variable_id);
        std::span<const void* const> inputs{item.inputs};
        if (item.first_only)
          inputs = inputs.first(1);
        auto at = host::first_overflow(item.rop, item.uop, item.type, inputs,
                                       component_of(item), 0, item.count);
        return make_error(errc::overflow,
                          "variable '" + (c ? (*c)->info.name : std::string{"?"})
                            + "': " + std::string{to_string(item.uop)}
                            + " overflows " + std::string{to_string(item.type)}
                            + " at element " + std::to_string(at)
                            + " on replica " + std::to_string(cfg_.rank)
                            + "; nothing was applied");
      }
    }
    return mismatch;
  }

  /// inputs[rank] = this replica's staging buffer for `item`: one it
  /// recorded, of the item's size, for an item that needs no host check.
  caf::error publish_staged(collective_item& item, size_t rank) {
    auto i = staged_.find(item.staged[rank]);
    const size_t nbytes = static_cast<size_t>(item.count) * size_of(item.type);
    if (i == staged_.end() || !i->second.recorded || host_memory_
        || i->second.nbytes != nbytes || item.require_equal
        || !is_floating(item.type)
        || item.source != collective_source::contributions)
      return make_error(errc::invalid_argument,
                        "replica " + std::to_string(cfg_.rank)
                          + ": the collective names staging buffer #"
                          + std::to_string(item.staged[rank])
                          + ", which this replica did not record for an item "
                            "of that size and kind");
    item.inputs[rank] = i->second.data;
    return {};
  }

  /// The coordinator is done with step `seq`.
  void release_step(uint64_t seq) {
    release_step_buffers(seq, true);
  }

  void leave() {
    quiesced_ = false;
    if (resume_pending_)
      return; // an injected delay releases the deferred operations
    drain();
  }

  void drain() {
    while (!quiesced_ && !deferred_.empty()) {
      auto next = std::move(deferred_.front());
      deferred_.pop_front();
      next();
    }
  }

  // Test support: a delayed replica runs one deferred operation per delay.
  void resume() {
    resume_pending_ = false;
    if (quiesced_ || deferred_.empty())
      return;
    auto next = std::move(deferred_.front());
    deferred_.pop_front();
    next();
    if (!deferred_.empty()) {
      resume_pending_ = true;
      self_->delayed_send(self_, injected_delay(), resume_atom::value);
    }
  }

  self_pointer self_;
  replica_config cfg_;

  /// This replica's slot in collective plans (its index in this process).
  int slot() const { return cfg_.slot >= 0 ? cfg_.slot : cfg_.rank; }
  std::unique_ptr<varsync::device> device_;
  /// device_->host_accessible(), asked once.
  bool host_memory_ = true;
  /// The sender of the first bind_atom: the strategy's coordinator.
  caf::actor_addr coordinator_;
  std::unordered_map<uint64_t, component> components_;
  bool quiesced_ = false;
  bool resume_pending_ = false;
  uint64_t operations_ = 0;
  std::deque<std::function<void()>> deferred_;
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
};

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
    [this](component_create_atom, const variable_info& info,
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
    [this](component_split_atom, uint64_t id,
           const tensor& x) -> caf::result<ok_atom> {
      if (auto err = refuse_unless_coordinator("component_split"))
        return err;
      return run_or_defer<ok_atom>([this, id, x] { return split(id, x); });
    },
    [this](step_atom, uint64_t seq,
           const replica_step_ptr& step) -> caf::result<step_report> {
      if (auto err = refuse_unless_coordinator("step"))
        return err;
      return run_or_defer<step_report>(
        [this, seq, step] { return run_step(seq, step); });
    },
    [this](step_apply_atom,
           const std::vector<recorded_update>& ys) -> caf::result<ok_atom> {
      if (auto err = refuse_unless_coordinator("step_apply"))
        return err;
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
           const collective_plan_ptr& plan) -> caf::result<int64_t> {
      if (auto err = refuse_unless_coordinator("collective_enter"))
        return err;
      if (inject_faults() == fault_outcome::failed)
        return failed_error();
      return caf::result<int64_t>{enter(*plan)};
    },
    [this](collective_work_atom,
           const collective_plan_ptr& plan) -> caf::result<ok_atom> {
      if (auto err = refuse_unless_coordinator("collective_work"))
        return err;
      if (!host_memory_) // the device collective driver does this work
        return make_error(errc::device_error,
                          "replica " + std::to_string(cfg_.rank) + " ("
                            + to_string(cfg_.device)
                            + "): host collective work on device memory");
      auto k = allreduce_one_pass(*plan, slot(), plan->num_replicas);
      if (k >= 0)
        return output_overflow_error(*plan, k);
      return ok_atom::value;
    },
    [this](collective_leave_atom) {
      if (!refuse_unless_coordinator("collective_leave"))
        leave();
    },
    [this](local_read_atom, uint64_t id) -> caf::result<tensor> {
      if (auto err = refuse_if_full())
        return err;
      return run_or_defer<tensor>([this, id] { return download(id); });
    },
    [this](local_update_atom, uint64_t id, update_op op,
           const tensor& x) -> caf::result<ok_atom> {
      if (auto err = refuse_if_full())
        return err;
      return run_or_defer<ok_atom>(
        [this, id, op, x] { return local_update(id, op, x); });
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
  // so that blocking strategy calls from there fail at once.
  resume_result resume(caf::execution_unit* ctx, size_t max_throughput) override {
    detail::varsync_actor_scope scope;
    return replica_actor::base::resume(ctx, max_throughput);
  }

private:
  replica_state state_;
};

} // namespace

caf::expected<replica_actor> spawn_replica(caf::actor_system& sys,
                                           const replica_config& cfg) {
  auto dev = make_device(cfg.device);
  if (!dev)
    return std::move(dev.error());
  log()->debug("spawning replica {} on {}", cfg.rank, to_string(cfg.device));
  return sys.spawn<replica_actor_impl>(cfg, std::move(*dev));
}

} // namespace varsync
