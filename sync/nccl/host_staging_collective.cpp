// The collective of host and CUDA replicas mixed, or of GPUs shared by
// several replicas: staged through host memory, explicitly (the "one
// device" of "reduce on one device, then broadcast" is the host;
// sync/nccl/device_collective.hpp).

#include <cstring>
#include <utility>
#include <vector>

#include "devices/cuda/cuda_device.hpp"
#include "devices/host_kernels.hpp"
#include "sync/nccl/device_collective.hpp"

namespace varsync {

namespace {

class host_staging_collective final : public device_collective {
private:
  caf::error run_item(const collective_item& item, item_buffers& b,
                      int n) override {
    const tensor_shape shape{item.count};
    std::vector<tensor> copies;
    std::vector<const void*> inputs(b.inputs.begin(), b.inputs.end());
    const int used = item.first_only ? 1 : n;
    inputs.resize(static_cast<size_t>(used));
    for (int r = 0; r < used; ++r) {
      if (!on_device(item, r))
        continue; // host memory already
      auto t = gpu_of(r).download(inputs[static_cast<size_t>(r)], item.type,
                                  shape);
      if (!t)
        return std::move(t.error());
      copies.push_back(std::move(*t));
      inputs[static_cast<size_t>(r)] = copies.back().raw();
    }
    auto y = tensor::empty(item.type, shape);
    if (inputs.size() == 1)
      std::memcpy(y.mutable_raw(), inputs[0], nbytes_of(item));
    else
      host::reduce(item.rop, item.type, y.mutable_raw(), inputs, 0,
                   item.count);
    if (item.target == collective_target::output) {
      std::memcpy(b.output, y.raw(), nbytes_of(item));
      return {};
    }
    for (int r = 0; r < n; ++r) {
      void* c = b.components[static_cast<size_t>(r)];
      if (slot_of(r) < 0)
        host::apply_update(item.uop, item.type, c, y.raw(), 0, item.count);
      else if (auto err = gpu_of(r).apply(c, item.uop, y))
        return err;
    }
    return {};
  }
};

} // namespace

caf::expected<std::shared_ptr<collective_algorithm>>
make_host_staging_collective(cuda_collective_plan topo) {
  return create_device_collective<host_staging_collective>(std::move(topo));
}

} // namespace varsync
