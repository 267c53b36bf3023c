#pragma once
// A replica step whose ON_WRITE contributions are small travels by value:
// the coordinator already holds every contribution (the step reports carry
// them), so it combines each update once and sends the results to every
// replica in one message, which applies them all or none. One round after
// the step instead of the collective's enter and work rounds.

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include <caf/expected.hpp>

#include "sync/collectives/collective_plan.hpp"
#include "varsync/internal/step_report.hpp"
#include "varsync/step_task.hpp"

namespace varsync {

/// True if every item reduces host contributions (none staged on a device)
/// into the components and they total at most `limit` bytes per replica
/// (strategy_options::small_step_bytes: by default the by-value rule,
/// varsync/internal/by_value.hpp, as the gather of small ON_READ reads).
bool is_small_step(const collective_plan& plan, size_t limit);

/// Combines each item of a small step by its rule (W4): y = the reduction
/// of the inputs rounded to the dtype, or input 0 (only_first_replica, one
/// replica, aggregation none once all inputs are equal). Fails before
/// anything is applied with aggregation_required when an item that requires
/// equal inputs has a replica whose input differs (W4/W5), or overflow when
/// an integer reduction does not fit the dtype (V4). `name_of` names a
/// variable id. The results, in issue order, are what every replica applies
/// with the items' update ops.
caf::expected<std::vector<recorded_update>>
combine_small_step(const collective_plan& plan,
                   const std::function<std::string(uint64_t)>& name_of);

} // namespace varsync
