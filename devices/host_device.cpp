#include "devices/host_device.hpp"

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "varsync/error.hpp"
#include "devices/host_kernels.hpp"
#include "devices/memory_budget.hpp"

namespace varsync {

// Each component carries its size in a header of one alignment unit, so that
// release() can take it off the count of live host components (the memory
// budget, devices/memory_budget.hpp).
namespace {
constexpr size_t alignment = 64;
} // namespace

caf::expected<void*> host_device::allocate(size_t nbytes) {
  auto total = host_component_footprint(nbytes);
  void* p = total > SIZE_MAX - alignment ? nullptr
                                         : std::aligned_alloc(alignment, total);
  if (p == nullptr)
    return make_error(errc::out_of_memory,
                      "cpu:" + std::to_string(index_) + ": cannot allocate "
                        + std::to_string(nbytes) + " bytes");
  *static_cast<size_t*>(p) = total;
  add_host_component_bytes(total);
  return static_cast<char*>(p) + alignment;
}

void host_device::release(void* data) {
  if (data == nullptr)
    return;
  void* p = static_cast<char*>(data) - alignment;
  remove_host_component_bytes(*static_cast<size_t*>(p));
  std::free(p);
}

caf::error host_device::upload(void* dst, const tensor& src) {
  if (src.nbytes() > 0)
    std::memcpy(dst, src.raw(), src.nbytes());
  return {};
}

caf::expected<tensor> host_device::download(const void* src, dtype type,
                                            const tensor_shape& shape) {
  auto out = tensor::empty(type, shape);
  if (out.nbytes() > 0)
    std::memcpy(out.mutable_raw(), src, out.nbytes());
  return out;
}

caf::error host_device::apply(void* dst, update_op op, const tensor& y) {
  host::apply_update(op, y.type(), dst, y.raw(), 0, y.size());
  return {};
}

caf::error host_device::split_assign(void* dst, const tensor& x, int rank,
                                     int num_replicas) {
  host::split_assign(x.type(), dst, x.raw(), 0, x.size(), rank, num_replicas);
  return {};
}

caf::error host_device::apply_local(void* dst, update_op op, dtype type,
                                    const void* y, int64_t count) {
  host::apply_update(op, type, dst, y, 0, count);
  return {};
}

caf::error host_device::copy_local(void* dst, const void* src, size_t nbytes) {
  if (nbytes > 0 && dst != src)
    std::memmove(dst, src, nbytes);
  return {};
}

namespace {

// Written once by a backend's load-time registration, read at replica
// creation.
std::atomic<device_factory> cuda_factory{nullptr};

} // namespace

void register_device_factory(device_kind kind, device_factory factory) {
  if (kind == device_kind::cuda)
    cuda_factory.store(factory);
}

caf::expected<std::unique_ptr<device>> make_device(const device_id& id) {
  if (id.kind == device_kind::host)
    return std::unique_ptr<device>{new host_device(id.index)};
  if (id.kind == device_kind::cuda)
    if (auto factory = cuda_factory.load())
      return factory(id.index);
  return make_error(errc::device_error,
                    "device " + to_string(id)
                      + " needs the CUDA backend: link varsync::cuda "
                        "(find_package(varsync COMPONENTS cuda)), built with "
                        "VARSYNC_CUDA=ON");
}

} // namespace varsync
