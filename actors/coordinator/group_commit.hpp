#pragma once
// Services mode's group commit across processes (P17): the cross-replica
// updates that wait, numbered, in every process share one agreement round
// instead of a round each. Each process states the run of updates it holds
// from the front of the one order (how many, and for each its fingerprint
// and its own verdict); the round decides the first `taken` of them, as
// many as every process holds, so that all processes apply the same ones,
// each applied or failed alike everywhere. The statement travels in the
// agreement round's payload area (sync/collectives/agreement.hpp). Pure:
// what the coordinator runs is in services_ordering.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <caf/error.hpp>
#include <caf/expected.hpp>

#include "varsync/tensor.hpp"
#include "varsync/variable.hpp"

namespace varsync::group_commit {

/// At most this many updates share a round.
constexpr size_t max_operations = 64;

/// One update as a process states it.
struct entry {
  /// fingerprint_of_update: the processes must hold the same update.
  uint64_t fingerprint = 0;
  /// 0: this process can apply it; else the errc of its failure here.
  uint32_t verdict = 0;
};

/// The bytes of a statement: `entries` (1 to max_operations) from the
/// update numbered `first`.
std::vector<std::byte> state(uint64_t first, std::span<const entry> entries);

/// What the variable's name, the update and its value make: equal in every
/// process that holds the same update (variable ids are per process).
uint64_t fingerprint_of_update(const std::string& variable, update_op op,
                               const tensor& value);

/// The outcome of one decided update.
struct outcome {
  /// 0: applied everywhere; else the errc of the first process that failed
  /// it (`process`), or mismatched_replica_updates where `process` holds
  /// another update.
  uint32_t code = 0;
  int process = -1;
};

struct decision {
  /// The updates decided (from the front; at least 1).
  size_t taken = 0;
  std::vector<outcome> outcomes;
};

/// Decides from every process's statement (rank order; each at least the
/// bytes state() wrote). replica_failed, naming the process, for a
/// statement no process can have meant (its count out of range, another
/// first update, an unknown error code); that fails the front update only.
caf::expected<decision> decide(uint64_t first,
                               const std::vector<std::vector<std::byte>>& all);

/// The error of an update `o` failed by another process: its code, naming
/// the process and the update (`what`).
caf::error failed_elsewhere(const outcome& o, const std::string& what);

} // namespace varsync::group_commit
