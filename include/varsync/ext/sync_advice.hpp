#pragma once
// The synchronization advisor (row M5, docs/metrics.md): what a variable's
// observed access pattern suggests about its synchronization, with the
// figures behind each suggestion. Advice only: nothing changes a variable's
// mode (a mode is part of a variable's meaning; recreate it to change it).

#include <cstdint>
#include <string>
#include <vector>

#include "varsync/ext/metrics.hpp"
#include "varsync/synchronization.hpp"

namespace varsync {

struct sync_advice {
  std::string variable;
  synchronization current = synchronization::on_write;
  synchronization suggested = synchronization::on_write;
  /// The aggregation to use with the suggestion (the current one, or sum
  /// where the current one would make the suggestion fail).
  aggregation agg = aggregation::none;
  /// One sentence: the pattern seen, with its figures, and what changes.
  std::string reason;
  /// The figures the rule looked at (copied from the snapshot).
  uint64_t steps = 0;
  uint64_t steps_updated = 0;
  uint64_t replica_reads = 0;
  uint64_t replica_updates = 0;
  uint64_t cross_replica_reads = 0;
  uint64_t bytes_moved = 0;
  double collective_seconds = 0;
};

struct advisor_options {
  /// Patterns seen fewer times than this are not judged.
  uint64_t min_observations = 20;
  /// ON_WRITE → ON_READ when the variable was read (cross-replica reads,
  /// plus replica reads per replica) at most this often per step that
  /// updated it.
  double rare_reads_per_update = 0.1;
  /// ON_READ → ON_WRITE when its cross-replica reads are at least this
  /// fraction of the strategy's steps.
  double cross_reads_per_step = 0.8;
};

/// One entry per variable whose pattern suggests another mode, in the
/// snapshot's variable order:
///  - ON_WRITE updated in steps but read rarely → ON_READ (no collective
///    per step; aggregated when read);
///  - ON_READ read in cross-replica context after (nearly) every step →
///    ON_WRITE (one collective per step instead of one per read);
///  - NONE read in cross-replica context → ON_READ (NONE has no
///    cross-replica value; ON_READ's aggregation states the one wanted).
std::vector<sync_advice> advise(const strategy_metrics& m,
                                advisor_options options = {});

/// The advice as a JSON array of objects (the field names above).
std::string to_json(const std::vector<sync_advice>& advice);

} // namespace varsync
