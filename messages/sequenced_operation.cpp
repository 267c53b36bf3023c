#include "messages/sequenced_operation.hpp"

#include <utility>

namespace varsync {

namespace {

// Where an operation of `kind` keeps its value: the initial value of a
// create, the value of an update or scatter; null for the others.
template <class Op>
auto bulk_value(Op& op) -> decltype(&op.value) {
  switch (op.kind) {
    case sequenced_kind::create:
      return &op.spec.initial_value;
    case sequenced_kind::update:
    case sequenced_kind::scatter:
      return &op.value;
    default:
      return nullptr;
  }
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
  auto* value = bulk_value(op);
  return (value != nullptr ? value->nbytes() : 0)
         + op.indices.size() * sizeof(int64_t);
}

bool defer_payload(sequenced_operation& op, held_payload& held) {
  auto* value = bulk_value(op);
  if (value == nullptr)
    return false;
  if (inline_payload_bytes(op) <= sequenced_inline_bytes)
    return false;
  op.deferred.present = true;
  op.deferred.type = value->type();
  op.deferred.shape = value->shape();
  op.deferred.indices = static_cast<int64_t>(op.indices.size());
  held.value = std::move(*value);
  held.indices = std::move(op.indices);
  *value = tensor{};
  op.indices.clear();
  return true;
}

void restore_payload(sequenced_operation& op, held_payload payload) {
  if (auto* value = bulk_value(op))
    *value = std::move(payload.value);
  op.indices = std::move(payload.indices);
  op.deferred = deferred_payload{};
}

} // namespace varsync
