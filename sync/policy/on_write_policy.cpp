#include "sync/policy/on_write_policy.hpp"

#include <string>

#include "varsync/error.hpp"

namespace varsync {

caf::error on_write_policy::validate_creation(variable_info& info,
                                              std::optional<bool> t) const {
  info.trainable = t.value_or(true);
  return {};
}

read_plan on_write_policy::cross_replica_read(const variable_info&,
                                              int) const {
  return {read_source::primary, reduce_op::sum, {}};
}

update_target on_write_policy::cross_replica_update(const variable_info&,
                                                    update_op) const {
  // W3: no reduction and no division, whatever the aggregation.
  return update_target::every_component;
}

// S2 (as TensorFlow): the min or max of a sum or a mean of contributions
// means nothing, so the mirrors take them only from one value.
caf::error on_write_policy::check_scatter(const variable_info& info,
                                          scatter_op op) const {
  if ((op != scatter_op::min && op != scatter_op::max)
      || info.agg == aggregation::none
      || info.agg == aggregation::only_first_replica)
    return {};
  return make_error(errc::invalid_argument,
                    "variable '" + info.name + "': " + std::string{to_string(op)}
                      + " needs aggregation none or only_first_replica, but "
                        "the variable has aggregation "
                      + std::string{to_string(info.agg)}
                      + "; nothing was changed");
}

contribution_rule
on_write_policy::combine_contributions(const variable_info& info) const {
  switch (info.agg) {
    case aggregation::sum: return {reduce_op::sum, false, false};
    case aggregation::mean: return {reduce_op::mean, false, false};
    case aggregation::only_first_replica: return {reduce_op::sum, true, false};
    case aggregation::none: break;
  }
  // W4 (TF differs): replicas must agree, else the update fails.
  return {reduce_op::sum, true, true};
}

checkpoint_entries on_write_policy::checkpoint_layout(const variable_info&)
  const {
  return checkpoint_entries::one_value;
}

// K6: every live component holds the value (W7).
survivor_rule on_write_policy::survivors(const variable_info&) const {
  return {survivor_rule::any_component};
}

} // namespace varsync
