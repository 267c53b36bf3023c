#pragma once
// What a replica step sees: its replica id, the replica count, its device, a
// zero-copy view of its local components, and updates that follow each
// variable's policy (ON_WRITE: recorded and applied collectively when the step
// completes; ON_READ and NONE: applied to the local component at once).

#include <caf/error.hpp>
#include <caf/expected.hpp>

#include "core/tensor.hpp"
#include "devices/device_id.hpp"
#include "sync/synchronization.hpp"
#include "varsync/variable.hpp"

namespace varsync {

namespace detail {

/// Implemented by the replica actor that runs the step.
class replica_access {
public:
  virtual ~replica_access() = default;
  virtual int replica_id() const = 0;
  virtual int num_replicas() const = 0;
  virtual device_id device() const = 0;
  virtual caf::expected<tensor_view> read(const variable_info& v) = 0;
  virtual caf::error update(const variable_info& v, update_op op,
                            const tensor& value) = 0;
  /// A scalar update without building a tensor where the policy allows.
  virtual caf::error update_scalar(const variable_info& v, update_op op,
                                   double value) = 0;
};

} // namespace detail

class replica_context {
public:
  explicit replica_context(detail::replica_access& impl) : impl_(&impl) {}

  int replica_id() const { return impl_->replica_id(); }
  int num_replicas() const { return impl_->num_replicas(); }
  device_id device() const { return impl_->device(); }

  /// The local component, without copying; valid until the step returns.
  caf::expected<tensor_view> read(const variable& v) const;
  /// A copy of the local component.
  caf::expected<tensor> read_copy(const variable& v) const;

  caf::error assign(const variable& v, const tensor& value);
  caf::error assign_add(const variable& v, const tensor& value);
  caf::error assign_sub(const variable& v, const tensor& value);
  /// Scalar overloads: `value` converted to the variable's dtype.
  caf::error assign(const variable& v, double value);
  caf::error assign_add(const variable& v, double value);
  caf::error assign_sub(const variable& v, double value);

  caf::error update(const variable& v, update_op op, const tensor& value);

private:
  detail::replica_access* impl_;
};

} // namespace varsync
