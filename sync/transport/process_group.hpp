#pragma once
// The processes of a strategy that spans several, as its collectives see
// them: a group joined once when the strategy starts, composed of a data
// plane (sync/transport/data_transport.hpp: the collectives, over the transport
// chosen at the join) and a control plane (sync/transport/control_plane.hpp:
// departures, services mode's sequencer, health), plus the figures of its
// agreement rounds. The transport behind it (Gloo over TCP, or shared
// memory on one host) registers a joiner when it is linked
// (actors/cluster/gloo_process_group.cpp), so that single-process programs
// never link it.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <caf/error.hpp>
#include <caf/expected.hpp>

#include "sync/transport/control_plane.hpp"
#include "sync/transport/data_transport.hpp"
#include "sync/transport/process_rounds.hpp"
#include "varsync/cluster_spec.hpp"

namespace varsync {

class process_group {
public:
  /// `control`: none for a group with no control plane (a test's).
  explicit process_group(std::shared_ptr<data_transport> transport,
                         std::shared_ptr<control_plane> control = nullptr);
  ~process_group();
  process_group(const process_group&) = delete;
  process_group& operator=(const process_group&) = delete;

  int rank() const { return transport_->rank(); }
  int size() const { return transport_->size(); }
  std::string describe() const { return transport_->describe(); }

  /// The data plane: every collective between the processes.
  data_transport& transport() { return *transport_; }
  /// The control plane: departures, the sequencer, health.
  control_plane& control() { return *control_; }
  /// Who kept whom waiting at the agreement rounds (M4).
  process_rounds& rounds() { return rounds_; }

private:
  // Destroyed in reverse: the transport before the control plane it may
  // have joined through.
  std::shared_ptr<control_plane> control_;
  std::shared_ptr<data_transport> transport_;
  process_rounds rounds_;
};

/// A joined group and where this process's replicas stand in it.
struct process_membership {
  std::shared_ptr<process_group> group;
  /// Replicas per rank, in rank order.
  std::vector<int> replicas_per_rank;
  /// The global id of this process's first replica.
  int first_replica = 0;
  /// Every replica of the strategy.
  int total_replicas = 0;
  /// Every process joined with this mode.
  cluster_mode mode = cluster_mode::training;
  /// In every process, every replica is a CUDA replica on a GPU of its own
  /// (what NCCL across processes needs; the same in every process, so that
  /// every process chooses the same collective).
  bool one_gpu_per_replica = false;
  /// cluster_spec::operation_timeout: every collective across the processes
  /// finishes within it (NCCL across processes is aborted past it).
  std::chrono::milliseconds operation_timeout{30000};
};

using process_group_joiner = caf::expected<process_membership> (*)(
  const cluster_spec& spec, int local_replicas, bool one_gpu_per_replica);

/// Registers (or, with nullptr, removes) the transport's joiner.
void register_process_group_joiner(process_group_joiner fn);

/// Joins the group that `spec` describes (blocking until every process has
/// arrived or the join timeout passed); `one_gpu_per_replica`: this
/// process's replicas are CUDA replicas on distinct GPUs (the membership's
/// flag is true when it holds in every process). invalid_argument for a bad
/// spec;
/// invalid_argument when no transport is linked (varsync::distributed).
caf::expected<process_membership> join_process_group(const cluster_spec& spec,
                                                     int local_replicas,
                                                     bool one_gpu_per_replica
                                                     = false);

/// The membership from the ranks' replica counts (gathered by the joiner):
/// global ids run over the ranks in order.
process_membership make_membership(std::shared_ptr<process_group> group,
                                   std::vector<int> replicas_per_rank);

} // namespace varsync
