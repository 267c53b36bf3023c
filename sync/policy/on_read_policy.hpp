#pragma once
// ON_READ (sync-on-read): replicas update their own component with no
// communication (R1); a cross-replica read aggregates the components (R3);
// cross-replica writes keep that aggregate meaningful (R4, R5).

#include "sync/policy/sync_policy.hpp"

namespace varsync {

class on_read_policy final : public sync_policy {
public:
  synchronization kind() const override { return synchronization::on_read; }
  caf::error validate_creation(variable_info& info,
                               std::optional<bool> trainable) const override;
  read_plan cross_replica_read(const variable_info& info,
                               int num_replicas) const override;
  update_target cross_replica_update(const variable_info& info,
                                     update_op op) const override;
  caf::expected<update_target>
  cross_replica_scatter(const variable_info& info,
                        scatter_op op) const override;
  bool collective_replica_updates() const override { return false; }
  contribution_rule
  combine_contributions(const variable_info& info) const override;
  bool mirrored() const override { return false; }
  checkpoint_entries
  checkpoint_layout(const variable_info& info) const override;
  survivor_rule survivors(const variable_info& info) const override;
};

} // namespace varsync
