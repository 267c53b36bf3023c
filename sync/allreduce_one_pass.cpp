#include "sync/allreduce_one_pass.hpp"

#include <algorithm>
#include <cstring>
#include <span>

#include "varsync/error.hpp"
#include "devices/host_kernels.hpp"

namespace varsync {

collective_item& collective_plan::add_item() {
  auto& item = items.emplace_back();
  item.inputs.assign(static_cast<size_t>(num_replicas), nullptr);
  item.components.assign(static_cast<size_t>(num_replicas), nullptr);
  item.staged.assign(static_cast<size_t>(num_replicas), 0);
  return item;
}

int64_t collective_plan::total_elements() const {
  int64_t n = 0;
  for (auto& item : items)
    n += item.count;
  return n;
}

std::pair<int64_t, int64_t> worker_slice(int64_t total, int worker,
                                         int num_workers) {
  constexpr int64_t granule = 16;
  auto granules = (total + granule - 1) / granule;
  auto lo = granules * worker / num_workers * granule;
  auto hi = granules * (worker + 1) / num_workers * granule;
  return {std::min(lo, total), std::min(hi, total)};
}

int64_t allreduce_one_pass(collective_plan& plan, int worker, int num_workers) {
  auto [lo, hi] = worker_slice(plan.total_elements(), worker, num_workers);
  int64_t offset = 0;
  int64_t overflowed = -1;
  for (size_t k = 0; k < plan.items.size(); ++k) {
    auto& item = plan.items[k];
    auto item_lo = std::max(lo, offset) - offset;
    auto item_hi = std::min(hi, offset + item.count) - offset;
    offset += item.count;
    if (item_lo >= item_hi)
      continue;
    std::span<const void* const> inputs{item.inputs};
    if (item.first_only)
      inputs = inputs.first(1);
    if (item.target == collective_target::components) {
      std::span<void* const> components{item.components};
      if (item.mirrored)
        host::reduce_and_apply_mirrored(item.rop, item.uop, item.type, inputs,
                                        components, item_lo, item_hi);
      else
        host::reduce_and_apply(item.rop, item.uop, item.type, inputs,
                               components, item_lo, item_hi);
    } else if (inputs.size() == 1) {
      auto width = static_cast<int64_t>(size_of(item.type));
      std::memcpy(static_cast<char*>(item.output)
                    + item_lo * width,
                  static_cast<const char*>(inputs[0]) + item_lo * width,
                  static_cast<size_t>((item_hi - item_lo) * width));
    } else {
      // Integer results that do not fit fail the collective (V4).
      if (!is_floating(item.type) && overflowed < 0
          && host::first_overflow(item.rop, update_op::assign, item.type,
                                  inputs, nullptr, item_lo, item_hi)
               >= 0)
        overflowed = static_cast<int64_t>(k);
      host::reduce(item.rop, item.type, item.output, inputs,
                   item_lo, item_hi);
    }
  }
  return overflowed;
}

bool inputs_equal(const collective_item& item, int replica) {
  if (replica == 0)
    return true;
  auto& mine = item.contributions[static_cast<size_t>(replica)];
  auto& first = item.contributions[0];
  return host::bitwise_equal(mine.raw(), first.raw(), mine.nbytes());
}

caf::error output_overflow_error(const collective_plan& plan, int64_t k) {
  auto& item = plan.items[static_cast<size_t>(k)];
  return make_error(errc::overflow,
                    "the " + std::string{to_string(item.rop)} + " of "
                      + std::string{to_string(item.type)} + " values (item "
                      + std::to_string(k) + ") overflows the dtype");
}

} // namespace varsync
