#include "sync/collectives/small_step.hpp"

#include <span>

#include "devices/host_kernels.hpp"
#include "sync/policy/step_rules.hpp"
#include "varsync/error.hpp"

namespace varsync {

bool is_small_step(const collective_plan& plan, size_t limit) {
  size_t bytes = 0;
  for (auto& item : plan.items) {
    if (item.source != collective_source::contributions
        || item.target != collective_target::components
        || item.contributions.size()
             != static_cast<size_t>(plan.num_replicas))
      return false;
    for (size_t r = 0; r < item.staged.size(); ++r)
      if (item.staged[r] != 0 || item.contributions[r].raw() == nullptr)
        return false;
    bytes += static_cast<size_t>(item.count) * size_of(item.type);
    if (bytes > limit)
      return false;
  }
  return !plan.items.empty();
}

caf::expected<std::vector<recorded_update>>
combine_small_step(const collective_plan& plan,
                   const std::function<std::string(uint64_t)>& name_of) {
  std::vector<recorded_update> out;
  out.reserve(plan.items.size());
  const size_t n = static_cast<size_t>(plan.num_replicas);
  std::vector<const void*> data(n);
  for (auto& item : plan.items) {
    const size_t nbytes = static_cast<size_t>(item.count) * size_of(item.type);
    for (size_t r = 0; r < n; ++r)
      data[r] = item.contributions[r].raw();
    std::span<const void* const> inputs{data};
    if (item.require_equal)
      for (size_t r = 1; r < n; ++r)
        if (!host::bitwise_equal(inputs[r], inputs[0], nbytes))
          return unequal_contributions_error(name_of(item.variable_id),
                                             static_cast<int>(r));
    const bool one = item.first_only || n == 1;
    if (one)
      inputs = inputs.first(1);
    if (!one && !is_floating(item.type)) {
      auto at = host::first_overflow(item.rop, update_op::assign, item.type,
                                     inputs, nullptr, 0, item.count);
      if (at >= 0)
        return make_error(errc::overflow,
                          "variable " + name_of(item.variable_id) + ": the "
                            + std::string{to_string(item.rop)}
                            + " of the replicas' contributions overflows "
                            + std::string{to_string(item.type)}
                            + " at element " + std::to_string(at)
                            + "; nothing was applied");
    }
    if (item.scatter) { // combined by the coordinator already (S1)
      recorded_update u{item.variable_id, item.uop, item.contributions[0]};
      u.scatter = true;
      u.sop = item.sop;
      u.indices = item.rows;
      out.push_back(std::move(u));
      continue;
    }
    if (one) { // the contribution itself (tensors are shared, not copied)
      out.push_back({item.variable_id, item.uop, item.contributions[0]});
      continue;
    }
    // Shaped like the contributions (the variable's shape).
    auto y = tensor::empty(item.type, item.contributions[0].shape());
    host::reduce(item.rop, item.type, y.mutable_raw(), inputs, 0, item.count);
    out.push_back({item.variable_id, item.uop, std::move(y)});
  }
  return out;
}

} // namespace varsync
