#include "messages/sequenced_operation.hpp"

#include <utility>

namespace varsync {

namespace {

// Where an operation keeps its bulk value: the initial value of a create,
// the value of an update, the rows of a scatter; null for the others.
tensor* bulk_value(operation& op) {
  if (auto* x = std::get_if<ops::create>(&op))
    return &x->spec.initial_value;
  if (auto* x = std::get_if<ops::update>(&op))
    return &x->value;
  if (auto* x = std::get_if<ops::scatter>(&op))
    return &x->slices.values;
  return nullptr;
}

std::vector<int64_t>* bulk_indices(operation& op) {
  auto* x = std::get_if<ops::scatter>(&op);
  return x != nullptr ? &x->slices.indices : nullptr;
}

constexpr int64_t max_payload_bytes = int64_t{1} << 40;

} // namespace

int64_t payload_bytes(const deferred_payload& p) {
  if (!is_valid(p.type) || p.indices < 0)
    return -1;
  auto n = element_count(p.shape);
  const auto width = static_cast<int64_t>(size_of(p.type));
  if (n < 0 || n > max_payload_bytes / width
      || p.indices > max_payload_bytes / 8)
    return -1;
  auto total = n * width + p.indices * 8;
  return total > max_payload_bytes ? -1 : total;
}

size_t inline_payload_bytes(const sequenced_operation& op) {
  return tensor_bytes(op.op);
}

bool consistent(const sequenced_operation& op) {
  if (!op.deferred.present)
    return true;
  const bool scatter = std::holds_alternative<ops::scatter>(op.op);
  const bool value = scatter || std::holds_alternative<ops::create>(op.op)
                     || std::holds_alternative<ops::update>(op.op);
  return value && (op.deferred.indices == 0 || scatter);
}

bool defer_payload(sequenced_operation& op, held_payload& held) {
  auto* value = bulk_value(op.op);
  if (value == nullptr)
    return false;
  if (inline_payload_bytes(op) <= sequenced_inline_bytes)
    return false;
  auto* indices = bulk_indices(op.op);
  op.deferred.present = true;
  op.deferred.type = value->type();
  op.deferred.shape = value->shape();
  op.deferred.indices
    = indices != nullptr ? static_cast<int64_t>(indices->size()) : 0;
  held.value = std::move(*value);
  *value = tensor{};
  if (indices != nullptr) {
    held.indices = std::move(*indices);
    indices->clear();
  }
  return true;
}

void restore_payload(sequenced_operation& op, held_payload payload) {
  if (auto* value = bulk_value(op.op))
    *value = std::move(payload.value);
  if (auto* indices = bulk_indices(op.op))
    *indices = std::move(payload.indices);
  op.deferred = deferred_payload{};
}

} // namespace varsync
