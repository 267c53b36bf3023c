#include "sync/policy/step_rules.hpp"

#include <algorithm>

#include "varsync/error.hpp"

namespace varsync {

namespace {

std::string issued(const recorded_update& u) {
  return std::string{op_name(u)} + (u.alike ? " (update_mirrored)" : "");
}

} // namespace

caf::error
check_same_updates(const std::vector<step_report>& reports,
                   const std::function<std::string(uint64_t)>& name_of) {
  if (reports.empty())
    return {};
  auto& first = reports[0].updates;
  for (size_t r = 1; r < reports.size(); ++r) {
    auto& mine = reports[r].updates;
    auto n = std::min(first.size(), mine.size());
    for (size_t k = 0; k < n; ++k)
      if (mine[k].variable_id != first[k].variable_id
          || mine[k].scatter != first[k].scatter
          || mine[k].alike != first[k].alike
          || (mine[k].scatter ? mine[k].sop != first[k].sop
                              : mine[k].op != first[k].op))
        return make_error(
          errc::mismatched_replica_updates,
          "update " + std::to_string(k) + " of the step: replica 0 issued "
            + issued(first[k]) + " on "
            + name_of(first[k].variable_id) + " but replica "
            + std::to_string(r) + " issued "
            + issued(mine[k]) + " on "
            + name_of(mine[k].variable_id)
            + "; no on_write update of the step was applied");
    if (mine.size() != first.size())
      return make_error(
        errc::mismatched_replica_updates,
        "replica 0 issued " + std::to_string(first.size())
          + " on_write updates in the step but replica " + std::to_string(r)
          + " issued " + std::to_string(mine.size())
          + "; no on_write update of the step was applied");
  }
  return {};
}

caf::error unequal_contributions_error(const std::string& name, int replica) {
  return make_error(
    errc::aggregation_required,
    "variable " + name + " has aggregation none, but replica "
      + std::to_string(replica)
      + " contributed a value that differs from replica 0's; give the "
        "variable an aggregation (sum, mean, only_first_replica) or "
        "contribute equal values. No update of the step was applied");
}

} // namespace varsync
