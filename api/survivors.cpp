// What survives of a variable when replicas are lost (K6) and which
// variables are kept per component (K1): the policy's answers, public so
// that checkpoints (an add-on) need no internals.

#include "varsync/strategy.hpp"

#include <string>
#include <vector>

#include "sync/distributed_reduce.hpp"
#include "sync/policy/sync_policy.hpp"
#include "varsync/error.hpp"

namespace varsync {

bool is_per_component(const variable& v) {
  return policy_for(v.synchronization()).checkpoint_layout(v.info())
         == checkpoint_entries::per_component;
}

caf::expected<tensor>
value_of_survivors(const variable& v,
                   const std::vector<std::optional<tensor>>& live,
                   bool aggregate) {
  const std::string what = "variable '" + v.name() + "' ("
                           + std::string{to_string(v.synchronization())}
                           + " / " + std::string{to_string(v.aggregation())}
                           + ")";
  if (is_per_component(v))
    return make_error(errc::invalid_argument,
                      "value_of_survivors: " + what
                        + " is kept per component and has no one value");
  if (live.empty())
    return make_error(errc::invalid_argument,
                      "value_of_survivors: " + what
                        + ": no components given (expected one per replica)");
  std::vector<tensor> present;
  for (auto& c : live)
    if (c)
      present.push_back(*c);
  if (present.empty())
    return make_error(errc::replica_failed,
                      what + ": no component survives");
  auto rule = policy_for(v.synchronization()).survivors(v.info());
  switch (rule.kind) {
    case survivor_rule::any_component:
      return present.front();
    case survivor_rule::component_0:
      if (!live.front())
        return make_error(errc::replica_failed,
                          what + ": " + std::string{to_string(v.aggregation())}
                            + " reads replica 0, which is lost");
      return *live.front();
    case survivor_rule::aggregate:
      break;
  }
  if (!aggregate)
    return make_error(errc::replica_failed,
                      what + ": its value depends on the lost components; "
                             "only the aggregation of the live ones can "
                             "stand for it");
  return reduce_values(rule.op, present);
}

} // namespace varsync
