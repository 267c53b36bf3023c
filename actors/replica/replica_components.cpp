// The component store: a replica's components and the operations on them
// that the coordinator and bound actors send.

#include "actors/replica/replica_components.hpp"

#include "core/op_checks.hpp"
#include "devices/host_kernels.hpp"
#include "varsync/error.hpp"

namespace varsync::replica_internal {

caf::expected<component*> component_store::find(uint64_t id, const std::string& name) {
  auto i = components_.find(id);
  if (i == components_.end())
    return make_error(errc::unknown_variable,
                      "replica " + std::to_string(rank_)
                        + " holds no component of variable "
                        + (name.empty() ? "#" + std::to_string(id)
                                        : "'" + name + "'"));
  return &i->second;
}

caf::expected<ok_atom> component_store::create(const shared_variable_info& shared,
                                               const tensor& initial) {
  if (!shared)
    return make_error(errc::invalid_argument,
                      "replica " + std::to_string(rank_)
                        + ": component_create without a variable");
  auto& info = *shared;
  if (components_.count(info.id) > 0)
    return make_error(errc::already_exists,
                      "replica " + std::to_string(rank_)
                        + " already holds variable '" + info.name + "'");
  if (auto err = validate_value(info, initial, "initial value"))
    return err;
  auto mem = device_.allocate(initial.nbytes());
  if (!mem)
    return std::move(mem.error());
  if (auto err = device_.upload(*mem, initial)) {
    device_.release(*mem);
    return err;
  }
  components_.emplace(info.id,
                      component{shared, *mem});
  return ok_atom::value;
}

caf::expected<ok_atom> component_store::destroy(uint64_t id) {
  auto i = components_.find(id);
  if (i != components_.end()) {
    device_.release(i->second.data);
    components_.erase(i);
  }
  return ok_atom::value;
}

caf::expected<tensor> component_store::download(uint64_t id) {
  auto c = find(id);
  if (!c)
    return std::move(c.error());
  return device_.download((*c)->data, (*c)->info->type, (*c)->info->shape);
}

caf::expected<ok_atom> component_store::apply(uint64_t id, update_op op, const tensor& x) {
  auto c = find(id);
  if (!c)
    return std::move(c.error());
  if (auto err = check_update_op(op, (*c)->info->name))
    return err;
  if (auto err = validate_value(*(*c)->info, x, to_string(op)))
    return err;
  if (auto err = check_overflow(**c, op, x.raw()))
    return err;
  if (auto err = device_.apply((*c)->data, op, x))
    return err;
  return ok_atom::value;
}

caf::error component_store::check_step_update(const component& comp,
                                              const recorded_update& y) const {
  if (y.scatter) {
    if (auto err = check_scatter_rows(comp, y))
      return has_code(err, errc::overflow)
               ? make_error(errc::overflow,
                            message_of(err) + " (no update of the step "
                                              "was applied)")
               : err;
    return {};
  }
  if (auto err = check_update_op(y.op, comp.info->name))
    return err;
  if (y.staged != 0)
    return make_error(errc::invalid_argument,
                      "replica " + std::to_string(rank_)
                        + ": a small step's update names a staging "
                          "buffer");
  if (auto err = validate_value(*comp.info, y.value, to_string(y.op)))
    return err;
  if (auto err = check_overflow(comp, y.op, y.value.raw()))
    return make_error(errc::overflow,
                      message_of(err) + " (no update of the step was "
                                        "applied)");
  return {};
}

caf::expected<ok_atom>
component_store::apply_step(const std::vector<recorded_update>& ys) {
  std::vector<component*> comps;
  comps.reserve(ys.size());
  for (auto& y : ys) {
    auto c = find(y.variable_id);
    if (!c)
      return std::move(c.error());
    if (auto err = check_step_update(**c, y))
      return err;
    comps.push_back(*c);
  }
  for (size_t k = 0; k < ys.size(); ++k) {
    if (ys[k].scatter) {
      if (auto err = write_scatter_rows(*comps[k], ys[k], true))
        return err;
      continue;
    }
    if (auto err = device_.apply(comps[k]->data, ys[k].op, ys[k].value))
      return err;
  }
  return ok_atom::value;
}

caf::expected<ok_atom> component_store::split(uint64_t id, const tensor& x) {
  auto c = find(id);
  if (!c)
    return std::move(c.error());
  if (auto err = validate_value(*(*c)->info, x, "assign"))
    return err;
  if (auto err = device_.split_assign((*c)->data, x, rank_,
                                       num_replicas_))
    return err;
  return ok_atom::value;
}

write_outcomes component_store::apply_writes(const component_writes& batch,
                                             bool first) {
  write_outcomes out;
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

caf::error component_store::local_add(uint64_t id, double value) {
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
    return device_.apply(comp.data, update_op::assign_add, x);
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

caf::error component_store::check_overflow(const component& comp,
                                           update_op op, const void* y,
                                           bool y_on_device) const {
  if (op == update_op::assign || is_floating(comp.info->type))
    return {};
  const int64_t n = element_count(comp.info->shape);
  auto staged_c = host_copy(comp.data, comp.info->type, n, !host_memory_);
  if (!staged_c)
    return std::move(staged_c.error());
  auto staged_y = host_copy(y, comp.info->type, n, y_on_device);
  if (!staged_y)
    return std::move(staged_y.error());
  const void* inputs[] = {staged_y->second};
  auto i = host::first_overflow(reduce_op::sum, op, comp.info->type, inputs,
                                staged_c->second, 0, n);
  if (i < 0)
    return {};
  return make_error(errc::overflow,
                    "variable '" + comp.info->name + "': "
                      + std::string{to_string(op)} + " overflows "
                      + std::string{to_string(comp.info->type)}
                      + " at element " + std::to_string(i) + " on replica "
                      + std::to_string(rank_) + "; nothing was changed");
}

caf::expected<std::pair<tensor, const void*>>
component_store::host_copy(const void* data, dtype type, int64_t n,
                         bool on_device) const {
  if (!on_device)
    return std::make_pair(tensor{}, data);
  auto t = device_.download(data, type, tensor_shape{n});
  if (!t)
    return std::move(t.error());
  const void* raw = t->raw();
  return std::make_pair(std::move(*t), raw);
}

void component_store::count_usage(replica_usage& out) const {
  out.ids.reserve(components_.size());
  out.reads.reserve(components_.size());
  out.updates.reserve(components_.size());
  for (auto& [id, c] : components_) {
    out.ids.push_back(id);
    out.reads.push_back(c.reads);
    out.updates.push_back(c.updates);
  }
}

} // namespace varsync::replica_internal
