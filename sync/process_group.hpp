#pragma once
// The processes of a strategy that spans several, as its collectives see
// them: a group with blocking collectives over host memory, joined once when
// the strategy starts. The transport behind it (Gloo over TCP) registers a
// joiner when it is linked (actors/gloo/gloo_process_group.cpp), so that
// single-process programs never link it. Blocking: a group is used from a
// thread of its own (the strategy's process collective actor), never from a
// CAF scheduler thread.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <caf/error.hpp>
#include <caf/expected.hpp>

#include "messages/sequenced_operation.hpp"
#include "sync/process_rounds.hpp"
#include "varsync/cluster_spec.hpp"
#include "varsync/dtype.hpp"
#include "varsync/synchronization.hpp"

namespace varsync {

/// Services mode: where the operations that process 0 ordered arrive, in
/// their order, on a thread of the transport (deliver must not block).
struct sequence_receiver {
  std::function<void(sequenced_operation)> deliver;
  /// The sequencer cannot be reached: nothing more arrives.
  std::function<void(caf::error)> failed;
};

class process_group {
public:
  virtual ~process_group() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// "gloo over TCP, rank 1 of 2 (...)".
  virtual std::string describe() const = 0;

  /// Prepares the calling thread for the group's collectives (the
  /// transport may need signals blocked there); called once by the thread
  /// that runs them.
  virtual void block_signals() {}

  /// data = op over the ranks' data, in place (the transport's contract:
  /// host kernels' arithmetic, overflow on every rank, replica_failed when a
  /// peer is gone or late; after that the group is unusable).
  virtual caf::error all_reduce(reduce_op op, dtype type, void* data,
                                int64_t count)
    = 0;
  /// data = root's data on every rank.
  virtual caf::error broadcast(void* data, size_t bytes, int root) = 0;
  /// out = every rank's `bytes` of `in`, in rank order.
  virtual caf::error all_gather(const void* in, void* out, size_t bytes) = 0;

  // Services mode (joined with cluster_mode::services): process 0 orders
  // the operations that any process submits. Thread-safe, non-blocking. A
  // group joined in training mode has no sequencer: both do nothing.

  /// Operations delivered before a receiver is attached wait for it.
  virtual void attach_sequencer(sequence_receiver) {}
  /// Sends `op` to process 0's sequencer (dropped if it is unreachable:
  /// the receiver's failed() has been or will be called).
  virtual void submit(sequenced_operation) {}
  /// In process 0: waits until every other process has left (its link to
  /// the sequencer is gone), at most `limit`; true if they all did. The
  /// others' last operations need process 0 to order them. Elsewhere:
  /// true at once.
  virtual bool await_others_left(std::chrono::milliseconds) { return true; }
  /// This process leaves in order (its strategy shuts down): the others
  /// hear it before its connections close, within a bound, so that none
  /// takes the closing for a crash. Idempotent; blocking.
  virtual void leave() {}

  /// Who kept whom waiting at the agreement rounds (M4).
  process_rounds& rounds() { return rounds_; }

private:
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

// What every transport of process_group refuses, in the same words (the
// transport's `who` first): invalid_argument for an invalid op or dtype,
// the mean of an integer dtype (convert to float64 first), a bad buffer or
// root.
caf::error check_all_reduce_input(const std::string& who, reduce_op op,
                                  dtype type, const void* data,
                                  int64_t count);
caf::error check_broadcast_input(const std::string& who, const void* data,
                                 size_t bytes, int root, int size);
caf::error check_all_gather_input(const std::string& who, const void* in,
                                  const void* out, size_t bytes);
/// overflow on every rank (V4): an integer result that does not fit.
caf::error all_reduce_overflow(const std::string& who, reduce_op op,
                               dtype type);

/// The membership from the ranks' replica counts (gathered by the joiner):
/// global ids run over the ranks in order.
process_membership make_membership(std::shared_ptr<process_group> group,
                                   std::vector<int> replicas_per_rank);

} // namespace varsync
