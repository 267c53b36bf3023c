// The collective of replicas that share one GPU: device copies and the
// reduce_and_apply kernel (sync/nccl/device_collective.hpp).

#include <span>
#include <utility>
#include <vector>

#include "devices/cuda/cuda_device.hpp"
#include "sync/nccl/device_collective.hpp"

namespace varsync {

namespace {

class same_gpu_collective final : public device_collective {
public:
  bool checks_device_contributions() const override { return true; }

private:
  caf::error run_item(const collective_item& item, item_buffers& b,
                      int n) override {
    auto& dev = gpu(0);
    const size_t nbytes = nbytes_of(item);
    const int used = item.first_only ? 1 : n;
    if (item.target == collective_target::output) { // source: components
      if (used == 1)
        return copy_to_host(dev, b.output, b.inputs[0], nbytes);
      auto out = scratch_on(0, nbytes);
      if (!out)
        return std::move(out.error());
      std::span<const void* const> inputs{b.inputs};
      if (auto err = dev.reduce(item.rop, item.type, *out,
                                inputs.first(static_cast<size_t>(used)),
                                item.count))
        return err;
      return copy_to_host(dev, b.output, *out, nbytes);
    }
    // contributions -> components: staged ones are on the GPU already,
    // host tensors are copied there first.
    std::vector<const void*> contributions;
    for (int r = 0; r < used; ++r) {
      auto p = on_gpu(0, r, b.inputs[static_cast<size_t>(r)],
                      on_device(item, r)
                        ? nullptr
                        : &item.contributions[static_cast<size_t>(r)],
                      nbytes);
      if (!p)
        return std::move(p.error());
      contributions.push_back(*p);
    }
    return same_device_all_reduce(dev, item.rop, item.uop, item.type,
                                  contributions,
                                  std::span<void* const>{b.components},
                                  item.count, item.mirrored);
  }
};

} // namespace

caf::expected<std::shared_ptr<collective_algorithm>>
make_same_gpu_collective(cuda_collective_plan topo) {
  return create_device_collective<same_gpu_collective>(std::move(topo));
}

} // namespace varsync
