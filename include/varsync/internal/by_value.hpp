#pragma once
// varsync's one by-value rule: data of at most by_value_bytes travels by
// value with the message that needs it, because a round of its own (a
// collective, a broadcast, a second message) would cost more than the
// bytes. Every such limit reads it:
//
// - services mode: an operation's bulk data travels inline with the
//   operation to process 0's sequencer (messages/sequenced_operation.hpp,
//   sequenced_inline_bytes); larger data is broadcast over the data plane;
// - the agreement round of the processes carries the partial results of a
//   small floating plan (sync/collectives/agreement.hpp,
//   small_payload_limit): one round instead of two;
// - cross-replica reductions of values up to it gather copies on the
//   coordinator instead of running a collective
//   (actors/coordinator/coordinator_helpers.hpp, gather_threshold_bytes);
// - strategy_options::small_step_bytes, by default: a step's ON_WRITE
//   contributions travel with the step reports.

#include <cstddef>

namespace varsync {

/// 4 KiB: the most data that travels by value (see above).
inline constexpr std::size_t by_value_bytes = 4096;

} // namespace varsync
