#pragma once
// Rules of collectives inside a coroutine step (X3, X4): what a replica may ask
// for, when the replicas' requests match, and the in-process results of the
// collectives that reduce nothing (all_gather, broadcast). all_reduce runs
// as a collective plan (sync/collectives/collective_plan.hpp).

#include <cstdint>
#include <string>
#include <vector>

#include <caf/error.hpp>
#include <caf/expected.hpp>

#include "varsync/internal/step_report.hpp"
#include "varsync/step_task.hpp"

namespace varsync {

/// "all_reduce sum of float32 [3]", "all_gather along axis 0 of 2 values
/// (float32 [2, 3], int64 [4])", "broadcast from replica 1 of ...".
std::string describe(const step_collective& c);

/// What one replica may ask for, checked on that replica before it waits:
/// a broadcast root in [0, num_replicas); all_gather values of rank >= 1
/// with `axis` in [-rank, rank).
caf::error check_step_request(const step_collective& c, int num_replicas);

/// X3: every replica waits at the same collective (kind, op, axis, root,
/// number of values) with values of the same dtypes and shapes (all_gather:
/// except along the axis); a replica that ended its step while another
/// waits is a mismatch too. `first_replica` numbers the reports' replicas.
caf::error check_step_collectives(const std::vector<step_report>& reports,
                                  int first_replica);

/// The result of an all_gather or broadcast from every replica's values in
/// global replica order: parts[r][k] is replica r's value k.
caf::expected<std::vector<tensor>>
combine_step_values(const step_collective& request,
                    const std::vector<std::vector<tensor>>& parts);

} // namespace varsync
