#include "sync/policy/on_read_policy.hpp"

#include <string>

#include "varsync/error.hpp"

namespace varsync {

caf::error on_read_policy::validate_creation(variable_info& info,
                                             std::optional<bool> t) const {
  // C4: gradients applied in replica context would never synchronize.
  if (t.value_or(false))
    return make_error(errc::invalid_argument,
                      "variable '" + info.name
                        + "': on_read variables cannot be trainable (replica "
                          "updates never synchronize); create it with "
                          "trainable = false or use on_write");
  info.trainable = false;
  return {};
}

read_plan on_read_policy::cross_replica_read(const variable_info& info,
                                             int) const {
  switch (info.agg) {
    case aggregation::sum:
      return {read_source::reduce_components, reduce_op::sum, {}};
    case aggregation::mean:
      return {read_source::reduce_components, reduce_op::mean, {}};
    case aggregation::only_first_replica:
      return {read_source::primary, reduce_op::sum, {}};
    case aggregation::none: break;
  }
  return {read_source::none, reduce_op::sum,
          make_error(errc::no_cross_replica_value,
                     "variable '" + info.name
                       + "' is on_read with aggregation none: it has no "
                         "cross-replica value; read local_values instead")};
}

update_target on_read_policy::cross_replica_update(const variable_info& info,
                                                   update_op op) const {
  if (info.agg != aggregation::sum)
    return update_target::every_component;
  // R4 / R5 (TF differs): keep the sum equal to what the caller wrote.
  return op == update_op::assign ? update_target::split
                                 : update_target::first_component;
}

// S4: R4 / R5 row by row. mul and div scale every component, so the sum
// and the mean scale alike; min and max of an aggregate are not the min and
// max of its parts, so sums and means refuse them.
caf::expected<update_target>
on_read_policy::cross_replica_scatter(const variable_info& info,
                                      scatter_op op) const {
  if (info.agg != aggregation::sum && info.agg != aggregation::mean)
    return update_target::every_component;
  switch (op) {
    case scatter_op::min:
    case scatter_op::max:
      return make_error(
        errc::invalid_argument,
        "variable '" + info.name + "' is on_read with aggregation "
          + std::string{to_string(info.agg)} + ": a cross-replica "
          + std::string{to_string(op)}
          + " of its components is not that of their aggregate; nothing "
            "was changed");
    case scatter_op::update:
      return info.agg == aggregation::sum ? update_target::split
                                          : update_target::every_component;
    case scatter_op::add:
    case scatter_op::sub:
      return info.agg == aggregation::sum ? update_target::first_component
                                          : update_target::every_component;
    default: return update_target::every_component;
  }
}

contribution_rule on_read_policy::combine_contributions(const variable_info&)
  const {
  return {};
}

// K1: without aggregation there is no cross-replica value; each component
// is stored.
checkpoint_entries
on_read_policy::checkpoint_layout(const variable_info& info) const {
  return info.agg == aggregation::none ? checkpoint_entries::per_component
                                       : checkpoint_entries::one_value;
}

// K6: the value is an aggregation of components, so it depends on the lost
// ones unless it reads component 0 only.
survivor_rule on_read_policy::survivors(const variable_info& info) const {
  if (info.agg == aggregation::only_first_replica)
    return {survivor_rule::component_0};
  return {survivor_rule::aggregate, info.agg == aggregation::mean
                                      ? reduce_op::mean
                                      : reduce_op::sum};
}

} // namespace varsync
