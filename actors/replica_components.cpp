// A replica's components and the operations on them that the coordinator and bound actors send, with fault injection and admission (V3).

#include "actors/replica_state.hpp"

namespace varsync::replica_internal {

caf::expected<component*> replica_state::find(uint64_t id, const std::string& name) {
  auto i = components_.find(id);
  if (i == components_.end())
    return make_error(errc::unknown_variable,
                      "replica " + std::to_string(cfg_.rank)
                        + " holds no component of variable "
                        + (name.empty() ? "#" + std::to_string(id)
                                        : "'" + name + "'"));
  return &i->second;
}

caf::expected<ok_atom> replica_state::create(const shared_variable_info& shared,
                              const tensor& initial) {
  if (!shared)
    return make_error(errc::invalid_argument,
                      "replica " + std::to_string(cfg_.rank)
                        + ": component_create without a variable");
  auto& info = *shared;
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
                      component{shared, *mem});
  return ok_atom::value;
}

caf::expected<ok_atom> replica_state::destroy(uint64_t id) {
  auto i = components_.find(id);
  if (i != components_.end()) {
    device_->release(i->second.data);
    components_.erase(i);
  }
  return ok_atom::value;
}

caf::expected<tensor> replica_state::download(uint64_t id) {
  auto c = find(id);
  if (!c)
    return std::move(c.error());
  return device_->download((*c)->data, (*c)->info->type, (*c)->info->shape);
}

caf::expected<ok_atom> replica_state::apply(uint64_t id, update_op op, const tensor& x) {
  auto c = find(id);
  if (!c)
    return std::move(c.error());
  if (auto err = check_update_op(op, (*c)->info->name))
    return err;
  if (auto err = validate_value(*(*c)->info, x, to_string(op)))
    return err;
  if (auto err = check_overflow(**c, op, x.raw()))
    return err;
  if (auto err = device_->apply((*c)->data, op, x))
    return err;
  return ok_atom::value;
}

caf::expected<ok_atom> replica_state::apply_step(const std::vector<recorded_update>& ys) {
  std::vector<component*> comps;
  comps.reserve(ys.size());
  for (auto& y : ys) {
    auto c = find(y.variable_id);
    if (!c)
      return std::move(c.error());
    if (y.scatter) {
      if (auto err = check_scatter_rows(**c, y))
        return has_code(err, errc::overflow)
                 ? make_error(errc::overflow,
                              message_of(err) + " (no update of the step "
                                                "was applied)")
                 : err;
      comps.push_back(*c);
      continue;
    }
    if (auto err = check_update_op(y.op, (*c)->info->name))
      return err;
    if (y.staged != 0)
      return make_error(errc::invalid_argument,
                        "replica " + std::to_string(cfg_.rank)
                          + ": a small step's update names a staging "
                            "buffer");
    if (auto err = validate_value(*(*c)->info, y.value, to_string(y.op)))
      return err;
    if (auto err = check_overflow(**c, y.op, y.value.raw()))
      return make_error(errc::overflow,
                        message_of(err) + " (no update of the step was "
                                          "applied)");
    comps.push_back(*c);
  }
  for (size_t k = 0; k < ys.size(); ++k) {
    if (ys[k].scatter) {
      if (auto err = write_scatter_rows(*comps[k], ys[k], true))
        return err;
      continue;
    }
    if (auto err = device_->apply(comps[k]->data, ys[k].op, ys[k].value))
      return err;
  }
  return ok_atom::value;
}

caf::expected<ok_atom> replica_state::split(uint64_t id, const tensor& x) {
  auto c = find(id);
  if (!c)
    return std::move(c.error());
  if (auto err = validate_value(*(*c)->info, x, "assign"))
    return err;
  if (auto err = device_->split_assign((*c)->data, x, cfg_.rank,
                                       cfg_.num_replicas))
    return err;
  return ok_atom::value;
}

write_outcomes replica_state::apply_writes(const component_writes& batch) {
  write_outcomes out;
  const bool first = slot() == 0;
  for (size_t k = 0; k < batch.writes.size(); ++k) {
    auto& w = batch.writes[k];
    if (w.first_only && !first)
      continue;
    auto r = w.split ? split(w.variable, w.value)
                     : apply(w.variable, w.op, w.value);
    if (r)
      continue;
    if (out.empty())
      out.resize(batch.writes.size());
    out[k] = std::move(r.error());
  }
  return out;
}

caf::expected<ok_atom> replica_state::local_update(uint64_t id, update_op op,
                                    const tensor& x) {
  auto c = find(id);
  if (!c)
    return std::move(c.error());
  if (auto err = update(*(*c)->info, op, x))
    return err;
  return ok_atom::value;
}

caf::expected<ok_atom> replica_state::local_scatter(uint64_t id, scatter_op op,
                                                    const indexed_slices& x) {
  auto c = find(id);
  if (!c)
    return std::move(c.error());
  if (auto err = scatter(*(*c)->info, op, x.indices, x.values))
    return err;
  return ok_atom::value;
}

caf::error replica_state::local_add(uint64_t id, double value) {
  auto c = find(id);
  if (!c)
    return std::move(c.error());
  auto& comp = **c;
  ++comp.updates;
  if (comp.policy().collective_replica_updates())
    return make_error(errc::invalid_argument,
                      "variable '" + comp.info->name
                        + "' is on_write: local_add applies to on_read and "
                          "none variables only");
  if (auto err = validate_scalar(*comp.info, value))
    return err;
  if (!host_memory_) { // device memory: one small upload
    auto x = tensor::filled(comp.info->type, {}, value);
    if (auto err = check_overflow(comp, update_op::assign_add, x.raw()))
      return make_error(errc::invalid_argument,
                        message_of(err) + " (local_add skipped)");
    return device_->apply(comp.data, update_op::assign_add, x);
  }
  auto overflow = [&] {
    return make_error(errc::invalid_argument,
                      "variable '" + comp.info->name + "': adding "
                        + std::to_string(value) + " overflows "
                        + std::string{to_string(comp.info->type)}
                        + "; the add was skipped");
  };
  if (comp.info->type == dtype::int32) {
    auto* x = static_cast<int32_t*>(comp.data);
    int32_t sum = 0;
    if (__builtin_add_overflow(*x, static_cast<int32_t>(value), &sum))
      return overflow();
    *x = sum;
    return {};
  }
  if (comp.info->type == dtype::int64) {
    auto* x = static_cast<int64_t*>(comp.data);
    int64_t sum = 0;
    if (__builtin_add_overflow(*x, static_cast<int64_t>(value), &sum))
      return overflow();
    *x = sum;
    return {};
  }
  alignas(8) unsigned char y[8];
  store_double(comp.info->type, y, 0, value);
  host::apply_update(update_op::assign_add, comp.info->type, comp.data, y, 0,
                     1);
  return {};
}

void replica_state::drop_local_add(uint64_t id, const caf::error& err) {
  cfg_.local_adds_dropped->fetch_add(1, std::memory_order_relaxed);
  if (warned_local_add_.insert(id).second)
    log()->warn("replica {} ({}): local_add of variable #{} not applied "
                "(further ones are only counted in local_adds_dropped): {}",
                cfg_.rank, to_string(cfg_.device), id, describe(err));
}

replica_state::fault_outcome
replica_state::inject_faults(uint64_t operations) {
  if (cfg_.faults.empty())
    return fault_outcome::none;
  operations_ += operations;
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

caf::error replica_state::failed_error() const {
  return make_error(errc::replica_failed,
                    "replica " + std::to_string(cfg_.rank) + " ("
                      + to_string(cfg_.device) + ") has failed");
}

std::chrono::milliseconds replica_state::injected_delay() const {
  std::chrono::milliseconds d{0};
  for (auto& f : cfg_.faults)
    if (f.what == replica_fault::kind::delay && operations_ >= f.at_operation)
      d = std::max(d, f.delay);
  return d;
}

caf::error replica_state::refuse_if_full() const {
  if (deferred_.size() < cfg_.max_deferred)
    return {};
  ++refusals_;
  return make_error(errc::overloaded,
                    "replica " + std::to_string(cfg_.rank) + " ("
                      + to_string(cfg_.device) + "): refused, "
                      + std::to_string(deferred_.size())
                      + " operations already wait (max_queued_operations); "
                        "nothing was changed, retry later");
}

replica_usage replica_state::usage() const {
  replica_usage out;
  out.ids.reserve(components_.size());
  out.reads.reserve(components_.size());
  out.updates.reserve(components_.size());
  for (auto& [id, c] : components_) {
    out.ids.push_back(id);
    out.reads.push_back(c.reads);
    out.updates.push_back(c.updates);
  }
  out.deferred = deferred_.size();
  out.refusals = refusals_;
  return out;
}

} // namespace varsync::replica_internal
