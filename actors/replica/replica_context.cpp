#include "varsync/replica_context.hpp"

#include "varsync/error.hpp"
#include "sync/policy/sync_policy.hpp"

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

caf::error replica_context::update_mirrored(const variable& v, update_op op,
                                            const tensor& value) {
  if (!v.valid())
    return invalid_handle();
  return impl_->update_mirrored(v.info(), op, value);
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

namespace varsync {

namespace {

using awaits_one = detail::collective_awaiter<tensor>;
using awaits_many = detail::collective_awaiter<std::vector<tensor>>;

std::vector<tensor> one(tensor value) {
  std::vector<tensor> out;
  out.push_back(std::move(value));
  return out;
}

step_collective request(step_collective_kind kind, std::vector<tensor> values,
                        reduce_op op = reduce_op::sum, int64_t axis = 0,
                        int32_t root = 0) {
  step_collective out;
  out.kind = kind;
  out.op = op;
  out.axis = axis;
  out.root = root;
  out.values = std::move(values);
  return out;
}

} // namespace

awaits_one replica_context::all_reduce(reduce_op op, tensor value) {
  return {*impl_, request(step_collective_kind::all_reduce,
                          one(std::move(value)), op)};
}

awaits_many replica_context::all_reduce(reduce_op op,
                                        std::vector<tensor> values) {
  return {*impl_,
          request(step_collective_kind::all_reduce, std::move(values), op)};
}

awaits_one replica_context::all_gather(tensor value, int64_t axis) {
  return {*impl_, request(step_collective_kind::all_gather,
                          one(std::move(value)), reduce_op::sum, axis)};
}

awaits_many replica_context::all_gather(std::vector<tensor> values,
                                        int64_t axis) {
  return {*impl_, request(step_collective_kind::all_gather, std::move(values),
                          reduce_op::sum, axis)};
}

awaits_one replica_context::broadcast(tensor value, int root) {
  return {*impl_, request(step_collective_kind::broadcast,
                          one(std::move(value)), reduce_op::sum, 0, root)};
}

awaits_many replica_context::broadcast(std::vector<tensor> values, int root) {
  return {*impl_, request(step_collective_kind::broadcast, std::move(values),
                          reduce_op::sum, 0, root)};
}

} // namespace varsync
