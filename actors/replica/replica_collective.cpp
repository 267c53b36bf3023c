// A replica's collective phases: enter (publish pointers, W4 votes, V4
// overflow checks), the work on its slices, and leave.

#include "actors/replica/replica_collective.hpp"

#include <span>
#include <string>
#include <vector>

#include "devices/host_kernels.hpp"
#include "devices/row_update.hpp"
#include "sync/collectives/collective_checks.hpp"
#include "sync/collectives/scatter_items.hpp"
#include "sync/scatter_update.hpp"
#include "varsync/error.hpp"

namespace varsync::replica_internal {

caf::expected<int64_t> collective_phases::enter(collective_run& run) {
  quiesced_ = true;
  auto rank = static_cast<size_t>(cfg_.slot);
  if (rank < run.buffers.ready_events.size())
    run.buffers.ready_events[rank] = store_.device().step_done_event();
  auto mismatch = publish(run);
  if (!mismatch)
    return mismatch;
  // V4: every replica checks its own component before any worker writes,
  // so an integer overflow anywhere fails the collective with nothing
  // changed. Across processes the collective checks once the reduction is
  // global (sync/collectives/across_processes.hpp).
  if (*mismatch < 0 && !run.plan->cross_process)
    if (auto err = check_overflow(run))
      return err;
  return mismatch;
}

caf::expected<int64_t> collective_phases::publish(collective_run& run) {
  auto& plan = *run.plan;
  auto& buffers = run.buffers;
  auto rank = static_cast<size_t>(cfg_.slot);
  int64_t mismatch = -1;
  for (size_t i = 0; i < plan.items.size(); ++i) {
    auto& item = plan.items[i];
    auto& b = buffers.items[i];
    bool uses_component = item.source == collective_source::components
                          || item.target == collective_target::components;
    if (uses_component) {
      auto c = store_.find(item.variable_id);
      if (!c)
        return std::move(c.error());
      if (item.source == collective_source::components)
        b.inputs[rank] = (*c)->data;
      if (item.target == collective_target::components)
        b.components[rank] = (*c)->data;
      if (item.scatter) {
        if (auto err = check_plan_rows(**c, item))
          return err;
        if (rank < b.component_elements.size())
          b.component_elements[rank] = element_count((*c)->info->shape);
      }
    }
    if (rank < item.staged.size() && item.staged[rank] != 0)
      if (auto err = publish_staged(item, b, rank))
        return err;
    // W4 on host values; the collective compares values on devices.
    if (item.require_equal && mismatch < 0 && !staged_on_device(item)
        && !inputs_equal(item, cfg_.slot))
      mismatch = static_cast<int64_t>(i);
  }
  return mismatch;
}

caf::error collective_phases::check_overflow(collective_run& run) {
  auto& plan = *run.plan;
  auto& buffers = run.buffers;
  auto rank = static_cast<size_t>(cfg_.slot);
  const bool host_memory = store_.host_memory();
  caf::error copy_failed;
  // A device component is copied to the host for the check (integer
  // items only).
  std::vector<tensor> copies; // device components only
  auto component_of = [&](size_t k) -> const void* {
    auto& item = plan.items[k];
    auto* component = buffers.items[k].components[rank];
    if (host_memory)
      return component;
    auto c = store_.host_copy(component, item.type, item.count, true);
    if (!c) {
      copy_failed = std::move(c.error());
      return nullptr;
    }
    copies.push_back(std::move(c->first));
    return c->second;
  };
  // Scatter items: the touched rows only (devices/row_update).
  auto scatter_overflow = [&](size_t k, const void* rows) -> int64_t {
    auto at = row_update_overflow(
      host_memory ? nullptr : &store_.device(),
      item_row_update(plan.items[k], buffers.items[k].components[rank], rows));
    if (!at) {
      copy_failed = std::move(at.error());
      return -1;
    }
    return *at;
  };
  auto k = enter_overflow(plan, buffers, component_of, scatter_overflow);
  if (copy_failed)
    return copy_failed;
  if (k < 0)
    return {};
  auto& item = plan.items[static_cast<size_t>(k)];
  auto c = store_.find(item.variable_id);
  std::span<const void* const> inputs{
    buffers.items[static_cast<size_t>(k)].inputs};
  if (item.first_only)
    inputs = inputs.first(1);
  int64_t at = -1;
  if (item.scatter) { // the element of the component, not of the rows
    auto e = scatter_overflow(static_cast<size_t>(k), inputs[0]);
    auto j = e / item.row_elems;
    at = item.rows[static_cast<size_t>(j)] * item.row_elems
         + (e - j * item.row_elems);
  } else {
    at = host::first_overflow(item.rop, item.uop, item.type, inputs,
                              component_of(static_cast<size_t>(k)), 0,
                              item.count);
  }
  return update_overflow_error(
    c ? (*c)->info->name : std::string{"?"},
    item.scatter ? to_string(item.sop) : to_string(item.uop), item.type, at,
    cfg_.rank);
}

caf::expected<ok_atom> collective_phases::work(collective_run& run) {
  if (!run.algorithm || !store_.host_memory()) // a driver does this work
    return make_error(errc::device_error,
                      "replica " + std::to_string(cfg_.rank) + " ("
                        + to_string(cfg_.device)
                        + "): collective work that a driver runs");
  if (auto err = run.algorithm->run(*run.plan, run.buffers, cfg_.slot,
                                    run.plan->num_replicas))
    return err;
  return ok_atom::value;
}

caf::error collective_phases::check_plan_rows(const component& comp,
                                              const collective_item& item) const {
  auto& info = *comp.info;
  // Ascending, so the first and last rows bound them all.
  bool ok = !info.shape.empty() && item.type == info.type
            && item.row_elems == row_elements(info)
            && rows_in_kernel_form(item.sop, item.rows)
            && (item.rows.empty()
                || (item.rows.front() >= 0 && item.rows.back() < info.shape[0]));
  if (ok)
    return {};
  return make_error(errc::invalid_argument,
                    "replica " + std::to_string(cfg_.rank) + ": the rows of "
                      + std::string{to_string(item.sop)} + " of '" + info.name
                      + "' in the collective do not fit its component");
}

caf::error collective_phases::publish_staged(const collective_item& item,
                                             item_buffers& b, size_t rank) {
  auto i = staged_.find(item.staged[rank]);
  const size_t nbytes = static_cast<size_t>(item.count) * size_of(item.type);
  const bool checked_here = item.require_equal || !is_floating(item.type);
  if (i == staged_.end() || !i->second.recorded || store_.host_memory()
      || i->second.nbytes != nbytes
      || (checked_here && !cfg_.collective_checks_device)
      || item.source != collective_source::contributions)
    return make_error(errc::invalid_argument,
                      "replica " + std::to_string(cfg_.rank)
                        + ": the collective names staging buffer #"
                        + std::to_string(item.staged[rank])
                        + ", which this replica did not record for an item "
                          "of that size and kind");
  b.inputs[rank] = i->second.data;
  return {};
}

} // namespace varsync::replica_internal
