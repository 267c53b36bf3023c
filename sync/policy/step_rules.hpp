#pragma once
// Rules of a replica step's collective updates that span replicas (the
// per-variable rules are in the policies).

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <caf/error.hpp>

#include "varsync/internal/step_report.hpp"
#include "varsync/step_task.hpp"

namespace varsync {

/// W6: every replica of a step issues the same sequence of collective
/// (ON_WRITE) updates: the same variables with the same ops in the same
/// order. Otherwise mismatched_replica_updates, naming the first difference
/// (`name_of` names a variable id), and nothing of the step is applied.
caf::error
check_same_updates(const std::vector<step_report>& reports,
                   const std::function<std::string(uint64_t)>& name_of);

/// W4/W5: the error of an update with aggregation none whose contribution
/// from `replica` differs from replica 0's (`name` is quoted already).
caf::error unequal_contributions_error(const std::string& name, int replica);

} // namespace varsync
