#include "sync/policy/none_policy.hpp"

#include <string>

#include "varsync/error.hpp"

namespace varsync {

caf::error none_policy::validate_creation(variable_info& info,
                                          std::optional<bool> t) const {
  if (info.agg != aggregation::none) // C3
    return make_error(errc::invalid_argument,
                      "variable '" + info.name
                        + "': synchronization none takes aggregation none, "
                          "not "
                        + std::string{to_string(info.agg)});
  info.trainable = t.value_or(true);
  return {};
}

read_plan none_policy::cross_replica_read(const variable_info& info,
                                          int num_replicas) const {
  if (num_replicas == 1) // N3: with one replica there is one value
    return {read_source::primary, reduce_op::sum, {}};
  return {read_source::none, reduce_op::sum,
          make_error(errc::no_cross_replica_value,
                     "variable '" + info.name
                       + "' has synchronization none over "
                       + std::to_string(num_replicas)
                       + " replicas: it has no cross-replica value; read "
                         "local_values instead")};
}

update_target none_policy::cross_replica_update(const variable_info&,
                                                update_op) const {
  return update_target::every_component; // N2
}

contribution_rule none_policy::combine_contributions(const variable_info&)
  const {
  return {};
}

// K1: components are independent (N1): each is stored.
checkpoint_entries none_policy::checkpoint_layout(const variable_info&)
  const {
  return checkpoint_entries::per_component;
}

// Never asked: per_component variables save their live components.
survivor_rule none_policy::survivors(const variable_info&) const {
  return {survivor_rule::any_component};
}

} // namespace varsync
