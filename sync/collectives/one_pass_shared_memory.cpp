#include "sync/collectives/one_pass_shared_memory.hpp"

#include <algorithm>
#include <cstring>
#include <span>

#include "devices/host_kernels.hpp"
#include "sync/collectives/collective_checks.hpp"

namespace varsync {

std::pair<int64_t, int64_t> worker_slice(int64_t total, int worker,
                                         int num_workers) {
  constexpr int64_t granule = 16;
  auto granules = (total + granule - 1) / granule;
  auto lo = granules * worker / num_workers * granule;
  auto hi = granules * (worker + 1) / num_workers * granule;
  return {std::min(lo, total), std::min(hi, total)};
}

int64_t one_pass_slice(const collective_plan& plan,
                       const collective_buffers& buffers, int worker,
                       int num_workers) {
  auto [lo, hi] = worker_slice(plan.total_elements(), worker, num_workers);
  int64_t offset = 0;
  int64_t overflowed = -1;
  for (size_t k = 0; k < plan.items.size(); ++k) {
    auto& item = plan.items[k];
    auto& b = buffers.items[k];
    auto item_lo = std::max(lo, offset) - offset;
    auto item_hi = std::min(hi, offset + item.count) - offset;
    const bool starts_here = lo <= offset && offset < hi;
    offset += item.count;
    if (item_lo >= item_hi)
      continue;
    std::span<const void* const> inputs{b.inputs};
    if (item.first_only)
      inputs = inputs.first(1);
    if (item.scatter && host::rows_repeat(item.rows)) {
      // S5: a repeated row's factors apply in order, so the worker whose
      // slice holds the item's first element applies all of it.
      if (starts_here)
        for (auto* component : b.components)
          host::scatter_apply(item.sop, item.type, component, item.row_elems,
                              item.rows, inputs[0], 0, item.count);
    } else if (item.scatter) { // rows of input 0 into every component
      for (auto* component : b.components)
        host::scatter_apply(item.sop, item.type, component, item.row_elems,
                            item.rows, inputs[0], item_lo, item_hi);
    } else if (item.target == collective_target::components) {
      std::span<void* const> components{b.components};
      if (item.mirrored)
        host::reduce_and_apply_mirrored(item.rop, item.uop, item.type, inputs,
                                        components, item_lo, item_hi);
      else
        host::reduce_and_apply(item.rop, item.uop, item.type, inputs,
                               components, item_lo, item_hi);
    } else if (inputs.size() == 1) {
      auto width = static_cast<int64_t>(size_of(item.type));
      std::memcpy(static_cast<char*>(b.output) + item_lo * width,
                  static_cast<const char*>(inputs[0]) + item_lo * width,
                  static_cast<size_t>((item_hi - item_lo) * width));
    } else {
      // Integer results that do not fit fail the collective (V4).
      if (!is_floating(item.type) && overflowed < 0
          && host::first_overflow(item.rop, update_op::assign, item.type,
                                  inputs, nullptr, item_lo, item_hi)
               >= 0)
        overflowed = static_cast<int64_t>(k);
      host::reduce(item.rop, item.type, b.output, inputs, item_lo, item_hi);
    }
  }
  return overflowed;
}

namespace {

class one_pass_shared_memory final : public collective_algorithm {
public:
  explicit one_pass_shared_memory(int num_replicas)
    : description_("host one-pass shared-memory all-reduce ("
                   + std::to_string(num_replicas) + " in-process replicas)") {
  }

  const std::string& description() const override {
    return description_;
  }

  collective_workers workers() const override {
    return collective_workers::replicas;
  }

  caf::error run(const collective_plan& plan, collective_buffers& buffers,
                 int worker, int num_workers) override {
    auto k = one_pass_slice(plan, buffers, worker, num_workers);
    if (k >= 0)
      return output_overflow_error(plan, k);
    return {};
  }

private:
  std::string description_;
};

} // namespace

std::shared_ptr<collective_algorithm>
make_one_pass_shared_memory(int num_replicas) {
  return std::make_shared<one_pass_shared_memory>(num_replicas);
}

} // namespace varsync
