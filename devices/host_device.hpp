#pragma once
// A replica in host memory: components in 64-byte aligned, preallocated
// buffers (small ones in slabs of their own); kernels from host_kernels.
// Used by its replica actor only.

#include "core/small_object_pool.hpp"
#include "devices/device.hpp"

namespace varsync {

class host_device final : public device {
public:
  explicit host_device(int index) : index_(index) {}

  device_id id() const override { return {device_kind::host, index_}; }
  bool host_accessible() const override { return true; }
  caf::expected<void*> allocate(size_t nbytes) override;
  void release(void* data) override;
  caf::error upload(void* dst, const tensor& src) override;
  caf::expected<tensor> download(const void* src, dtype type,
                                 const tensor_shape& shape) override;
  caf::error apply(void* dst, update_op op, const tensor& y) override;
  caf::error split_assign(void* dst, const tensor& x, int rank,
                          int num_replicas) override;
  caf::error apply_local(void* dst, update_op op, dtype type, const void* y,
                         int64_t count) override;
  caf::error copy_local(void* dst, const void* src, size_t nbytes) override;

private:
  int index_;
  /// Components up to small_host_component bytes: scalars and short
  /// vectors, which thousands of variables are made of.
  small_object_pool small_;
};

} // namespace varsync
