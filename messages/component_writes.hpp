#pragma once
// Cross-replica writes that queued at the coordinator while earlier ones
// were in flight travel to each replica as one message (group commit,
// actors/coordinator/write_batcher.cpp): the replica applies them in their order
// and answers one error per write. By shared pointer between in-process
// actors only: one batch is read by every replica, never copied.

#include <cstdint>
#include <memory>
#include <vector>

#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/error.hpp>

#include "varsync/synchronization.hpp"
#include "varsync/tensor.hpp"

namespace varsync {

/// One cross-replica update as a replica applies it.
struct component_write {
  uint64_t variable = 0;
  update_op op = update_op::assign;
  /// ON_READ(SUM) assign: each component takes its share of the value.
  bool split = false;
  /// Only the replica in slot 0 applies it (ONLY_FIRST_REPLICA).
  bool first_only = false;
  tensor value;
};

struct component_writes {
  std::vector<component_write> writes;
};

using component_writes_ptr = std::shared_ptr<const component_writes>;

/// A replica's answer: empty if every write applied, else one entry per
/// write (none where it applied).
using write_outcomes = std::vector<caf::error>;

} // namespace varsync

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(varsync::component_writes_ptr)
