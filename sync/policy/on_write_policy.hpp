#pragma once
// ON_WRITE (mirrored): every component always equal (W7). Cross-replica
// updates apply x to every component (W3); replica-context updates are
// collective, combined per aggregation and applied when the step completes
// (W4, W5). Reads return the local or the primary component (W1, W2).

#include "sync/policy/sync_policy.hpp"

namespace varsync {

class on_write_policy final : public sync_policy {
public:
  synchronization kind() const override { return synchronization::on_write; }
  caf::error validate_creation(variable_info& info,
                               std::optional<bool> trainable) const override;
  read_plan cross_replica_read(const variable_info& info,
                               int num_replicas) const override;
  update_target cross_replica_update(const variable_info& info,
                                     update_op op) const override;
  bool collective_replica_updates() const override { return true; }
  contribution_rule
  combine_contributions(const variable_info& info) const override;
  caf::error check_scatter(const variable_info& info,
                           scatter_op op) const override;
  bool mirrored() const override { return true; }
  checkpoint_entries
  checkpoint_layout(const variable_info& info) const override;
  survivor_rule survivors(const variable_info& info) const override;
};

} // namespace varsync
