#pragma once
// NONE (TF differs: accepted under a strategy): independent local components
// that are never synchronized (N1-N3).

#include "sync/policy/sync_policy.hpp"

namespace varsync {

class none_policy final : public sync_policy {
public:
  synchronization kind() const override { return synchronization::none; }
  caf::error validate_creation(variable_info& info,
                               std::optional<bool> trainable) const override;
  read_plan cross_replica_read(const variable_info& info,
                               int num_replicas) const override;
  update_target cross_replica_update(const variable_info& info,
                                     update_op op) const override;
  bool collective_replica_updates() const override { return false; }
  contribution_rule
  combine_contributions(const variable_info& info) const override;
  bool mirrored() const override { return false; }
  checkpoint_entries
  checkpoint_layout(const variable_info& info) const override;
  survivor_rule survivors(const variable_info& info) const override;
};

} // namespace varsync
