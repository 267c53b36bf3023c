#include "sync/collectives/collective_plan.hpp"

#include "sync/collectives/collective_buffers.hpp"

namespace varsync {

collective_item& collective_plan::add_item() {
  auto& item = items.emplace_back();
  item.staged.assign(static_cast<size_t>(num_replicas), 0);
  return item;
}

int64_t collective_plan::total_elements() const {
  int64_t n = 0;
  for (auto& item : items)
    n += item.count;
  return n;
}

collective_buffers bind_plan_buffers(collective_plan& plan) {
  collective_buffers out;
  const auto n = static_cast<size_t>(plan.num_replicas);
  out.items.resize(plan.items.size());
  for (size_t k = 0; k < plan.items.size(); ++k) {
    auto& item = plan.items[k];
    auto& b = out.items[k];
    b.inputs.assign(n, nullptr);
    b.components.assign(n, nullptr);
    for (size_t r = 0; r < item.contributions.size() && r < n; ++r)
      if (r >= item.staged.size() || item.staged[r] == 0)
        b.inputs[r] = item.contributions[r].raw();
    if (item.target == collective_target::output)
      b.output = item.result.mutable_raw();
    if (item.scatter)
      b.component_elements.assign(n, -1); // bound at enter
  }
  return out;
}

} // namespace varsync
