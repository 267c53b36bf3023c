#include "varsync/replica_context.hpp"

#include "varsync/error.hpp"
#include "sync/sync_policy.hpp"

namespace varsync {

namespace {

caf::error invalid_handle() {
  return make_error(errc::invalid_argument,
                    "replica step: the variable handle is empty");
}

} // namespace

caf::expected<tensor_view> replica_context::read(const variable& v) const {
  if (!v.valid())
    return invalid_handle();
  return impl_->read(v.info());
}

caf::expected<tensor> replica_context::read_copy(const variable& v) const {
  auto view = read(v);
  if (!view)
    return std::move(view.error());
  return tensor::from_bytes(view->type, *view->shape, view->data,
                            view->nbytes());
}

caf::expected<device_view>
replica_context::device_pointer(const variable& v) const {
  if (!v.valid())
    return invalid_handle();
  return impl_->device_pointer(v.info());
}

stream_handle replica_context::stream() const {
  return impl_->stream();
}

caf::error replica_context::update_from_device(const variable& v, update_op op,
                                               const void* data) {
  if (!v.valid())
    return invalid_handle();
  if (data == nullptr && element_count(v.info().shape) > 0)
    return make_error(errc::invalid_argument,
                      "replica step: update_from_device of '" + v.info().name
                        + "' with a null pointer");
  return impl_->update_from_device(v.info(), op, data);
}

caf::expected<device_view>
replica_context::contribution_buffer(const variable& v) {
  if (!v.valid())
    return invalid_handle();
  return impl_->contribution_buffer(v.info());
}

caf::error replica_context::update(const variable& v, update_op op,
                                   const tensor& value) {
  if (!v.valid())
    return invalid_handle();
  return impl_->update(v.info(), op, value);
}

caf::error replica_context::scatter(const variable& v, scatter_op op,
                                    const std::vector<int64_t>& indices,
                                    const tensor& values) {
  if (!v.valid())
    return invalid_handle();
  return impl_->scatter(v.info(), op, indices, values);
}

caf::error replica_context::assign(const variable& v, const tensor& x) {
  return update(v, update_op::assign, x);
}

caf::error replica_context::assign_add(const variable& v, const tensor& x) {
  return update(v, update_op::assign_add, x);
}

caf::error replica_context::assign_sub(const variable& v, const tensor& x) {
  return update(v, update_op::assign_sub, x);
}

namespace {

caf::error scalar_update(detail::replica_access& impl, const variable& v,
                         update_op op, double value) {
  if (!v.valid())
    return invalid_handle();
  return impl.update_scalar(v.info(), op, value);
}

} // namespace

caf::error replica_context::assign(const variable& v, double x) {
  return scalar_update(*impl_, v, update_op::assign, x);
}

caf::error replica_context::assign_add(const variable& v, double x) {
  return scalar_update(*impl_, v, update_op::assign_add, x);
}

caf::error replica_context::assign_sub(const variable& v, double x) {
  return scalar_update(*impl_, v, update_op::assign_sub, x);
}

} // namespace varsync
