#pragma once
// A cross-replica operation of services mode (cluster_mode::services) as it
// travels to process 0's sequencer and back to every process: plain data
// (no closure), so that it crosses processes over CAF's network layer. The
// sequencer numbers the operations; every process applies them in that
// order (W8 across processes, P2).

#include <cstdint>
#include <string>
#include <vector>

#include <caf/meta/load_callback.hpp>
#include <caf/meta/type_name.hpp>
#include <caf/sec.hpp>

#include "messages/operation.hpp"
#include "varsync/internal/by_value.hpp"
#include "varsync/tensor.hpp"
#include "varsync/internal/tensor_inspect.hpp"

namespace varsync {

/// Bulk data of an operation (an update's or scatter's values, a scatter's
/// indices, a create's initial value) larger than this many bytes in all
/// does not travel with the operation over CAF: when every process applies
/// the operation, the process that issued it broadcasts the data through
/// the process group (the data plane). Smaller data stays inline: one
/// broadcast round would cost more than the bytes (the by-value rule,
/// varsync/internal/by_value.hpp).
constexpr size_t sequenced_inline_bytes = by_value_bytes;

/// What an operation's deferred bulk data is, so that every process can
/// receive it at the operation's turn.
struct deferred_payload {
  bool present = false;
  /// The value (update, scatter) or initial value (create).
  dtype type = dtype::float32;
  tensor_shape shape;
  /// scatter: how many indices.
  int64_t indices = 0;
};

/// The payload's size in bytes, or -1 for a description no operation can
/// have (negative or overflowing sizes, over 2^40 bytes).
int64_t payload_bytes(const deferred_payload& p);

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, deferred_payload& x) {
  auto load = caf::meta::load_callback([&]() -> caf::error {
    if (!is_valid(x.type) || (x.present && payload_bytes(x) < 0)
        || (!x.present && (!x.shape.empty() || x.indices != 0)))
      return caf::sec::invalid_argument;
    return caf::none;
  });
  return f(caf::meta::type_name("varsync::deferred_payload"), x.present,
           x.type, x.shape, x.indices, load);
}

struct sequenced_operation {
  /// Set by the sequencer: the operation's place in the one order.
  uint64_t sequence = 0;
  /// Set by the sequencer: the rank that issued it (its caller waits there).
  int32_t origin = -1;
  /// The issuing process's number for the waiting caller.
  uint64_t ticket = 0;
  /// Set by the sequencer: the epoch of its lead under an arbiter (P16),
  /// 0 without one. A process never applies an operation of an epoch
  /// older than one it has seen.
  uint64_t epoch = 0;
  /// One that sequenceable() accepts.
  operation op = ops::list{};
  /// Set where the bulk data (an update's value, a scatter's rows and
  /// indices, a create's initial value) was taken out to travel through
  /// the data plane (defer_payload).
  deferred_payload deferred;
  /// Where it is applied: its variable names this process's id again
  /// (services_ordering::to_local). Not sent.
  bool local_ids = false;
};

/// An operation's bulk data while it travels without it.
struct held_payload {
  tensor value;
  std::vector<int64_t> indices;
};

/// Takes the bulk data out of `op` into `held` and describes it in
/// op.deferred when it is larger than sequenced_inline_bytes; false (and
/// nothing changed) where it stays inline.
bool defer_payload(sequenced_operation& op, held_payload& held);

/// The bytes of tensors (value, indices, initial value) `op` carries.
size_t inline_payload_bytes(const sequenced_operation& op);

/// Whether op.deferred describes data `op` can have (a value for create,
/// update and scatter; indices for scatter only).
bool consistent(const sequenced_operation& op);

/// Puts the bulk data back into `op` (received through the data plane, or
/// the issuing process's own); op.deferred is cleared.
void restore_payload(sequenced_operation& op, held_payload payload);

inline sequenced_operation make_sequenced(operation op) {
  sequenced_operation out;
  out.op = std::move(op);
  return out;
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, sequenced_operation& x) {
  // V4: an enum byte outside its range never leaves deserialization.
  auto load = caf::meta::load_callback([&]() -> caf::error {
    if (!sequenceable(x.op) || x.origin < -1 || !consistent(x))
      return caf::sec::invalid_argument;
    return caf::none;
  });
  return f(caf::meta::type_name("varsync::sequenced_operation"), x.sequence,
           x.origin, x.ticket, x.epoch, x.op, x.deferred, load);
}

} // namespace varsync
