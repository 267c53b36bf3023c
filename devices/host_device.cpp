#include "devices/host_device.hpp"

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>

#include "varsync/error.hpp"
#include "devices/host_kernels.hpp"
#include "devices/memory_budget.hpp"

namespace varsync {

// Each component carries its footprint in the 8 bytes just before its
// data, so that release() can take it off the count of live host components
// (the memory budget, devices/memory_budget.hpp) and find the block: small
// components (16-byte aligned, from the replica's pool) sit 16 bytes into
// theirs, larger ones (64-byte aligned, malloc) 64 bytes.
namespace {

constexpr size_t header_of(uint64_t total) {
  return total <= host_component_footprint(small_host_component) ? 16 : 64;
}

} // namespace

caf::expected<void*> host_device::allocate(size_t nbytes) {
  auto total = host_component_footprint(nbytes);
  const size_t header = header_of(total);
  void* p = nullptr;
  if (header == 16) {
    try {
      p = small_.allocate(total, 16);
    } catch (const std::bad_alloc&) {
    }
  } else if (total <= SIZE_MAX - 64) {
    p = std::aligned_alloc(64, total);
  }
  if (p == nullptr)
    return make_error(errc::out_of_memory,
                      "cpu:" + std::to_string(index_) + ": cannot allocate "
                        + std::to_string(nbytes) + " bytes");
  auto* data = static_cast<char*>(p) + header;
  std::memcpy(data - sizeof(uint64_t), &total, sizeof(uint64_t));
  add_host_component_bytes(total);
  return data;
}

void host_device::release(void* data) {
  if (data == nullptr)
    return;
  uint64_t total = 0;
  std::memcpy(&total, static_cast<char*>(data) - sizeof(uint64_t),
              sizeof(uint64_t));
  remove_host_component_bytes(total);
  const size_t header = header_of(total);
  if (header == 16)
    small_.deallocate(static_cast<char*>(data) - header, total, 16);
  else
    std::free(static_cast<char*>(data) - header);
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

caf::error device::read_rows(const void* src, size_t row_bytes,
                             std::span<const int64_t> rows, void* out) {
  if (!host_accessible())
    return make_error(errc::device_error,
                      to_string(id()) + ": read_rows is not implemented");
  auto* to = static_cast<std::byte*>(out);
  for (size_t j = 0; j < rows.size(); ++j)
    std::memcpy(to + j * row_bytes,
                static_cast<const std::byte*>(src)
                  + static_cast<size_t>(rows[j]) * row_bytes,
                row_bytes);
  return {};
}

caf::error device::write_rows(void* dst, size_t row_bytes,
                              std::span<const int64_t> rows, const void* in) {
  if (!host_accessible())
    return make_error(errc::device_error,
                      to_string(id()) + ": write_rows is not implemented");
  auto* from = static_cast<const std::byte*>(in);
  for (size_t j = 0; j < rows.size(); ++j)
    std::memcpy(static_cast<std::byte*>(dst)
                  + static_cast<size_t>(rows[j]) * row_bytes,
                from + j * row_bytes, row_bytes);
  return {};
}

caf::expected<std::unique_ptr<device>> make_device(const device_id& id) {
  if (id.kind == device_kind::host)
    return std::unique_ptr<device>{new host_device(id.index)};
  if (id.kind == device_kind::cuda)
    if (auto factory = cuda_factory.load())
      return factory(id.index);
  return cuda_backend_missing(id);
}

caf::error cuda_backend_missing(const device_id& id) {
  return make_error(errc::device_error,
                    "device " + to_string(id)
                      + " needs the CUDA backend: link varsync::cuda "
                        "(find_package(varsync COMPONENTS cuda)), built with "
                        "VARSYNC_CUDA=ON");
}

} // namespace varsync
