#pragma once
// The typed actor interfaces that callers which are actors use
// (docs/actor-protocol.md): the coordinator of a strategy, a replica as seen
// by an actor bound to it, and the checkpoint actor. They are the public
// subsets of the interfaces the implementation speaks; a handle of one of
// these types cannot send an internal message.

#include <cstdint>
#include <string>
#include <vector>

#include <caf/atom.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include "varsync/ext/metrics.hpp"
#include "varsync/variable.hpp"
#include "varsync/step_task.hpp"
#include "varsync/strategy_description.hpp"
#include "varsync/synchronization.hpp"
#include "varsync/tensor.hpp"
#include "varsync/internal/tensor_inspect.hpp"

// -- atoms -------------------------------------------------------------------
// The atoms of varsync's public actor protocol (CAF 0.17 atoms: at most 10
// characters). Internal atoms live beside the implementation.
namespace varsync {

// Coordinator requests.
using create_atom = caf::atom_constant<caf::atom("vs_create")>;
using lookup_atom = caf::atom_constant<caf::atom("vs_lookup")>;
using list_atom = caf::atom_constant<caf::atom("vs_list")>;
using destroy_atom = caf::atom_constant<caf::atom("vs_destroy")>;
using read_atom = caf::atom_constant<caf::atom("vs_read")>;
using update_atom = caf::atom_constant<caf::atom("vs_update")>;
using scatter_atom = caf::atom_constant<caf::atom("vs_scatter")>;
using values_atom = caf::atom_constant<caf::atom("vs_values")>;
using run_atom = caf::atom_constant<caf::atom("vs_run")>;
using allreduce_atom = caf::atom_constant<caf::atom("vs_allred")>;
using describe_atom = caf::atom_constant<caf::atom("vs_desc")>;
using metrics_atom = caf::atom_constant<caf::atom("vs_metrics")>;
/// M9: every process's metrics snapshot.
using process_metrics_atom = caf::atom_constant<caf::atom("vs_pmetric")>;
using wait_for_atom = caf::atom_constant<caf::atom("vs_waitfor")>;
using barrier_atom = caf::atom_constant<caf::atom("vs_barrier")>;
using agree_atom = caf::atom_constant<caf::atom("vs_agree")>;

// Requests of actors bound to one replica (replica context outside a step).
using local_read_atom = caf::atom_constant<caf::atom("vs_lread")>;
using local_update_atom = caf::atom_constant<caf::atom("vs_lupdate")>;
using local_scatter_atom = caf::atom_constant<caf::atom("vs_lscat")>;
/// Fire-and-forget scalar add of a bound actor (no reply).
using local_add_atom = caf::atom_constant<caf::atom("vs_ladd")>;

// Checkpoint actor requests.
using checkpoint_save_atom = caf::atom_constant<caf::atom("vs_cksave")>;
using checkpoint_restore_atom = caf::atom_constant<caf::atom("vs_ckrest")>;
/// save_survivors; its bool is survivor_options::aggregate_survivors.
using checkpoint_save_survivors_atom
  = caf::atom_constant<caf::atom("vs_cksurv")>;

/// The reply of requests that return nothing else.
using ok_atom = caf::atom_constant<caf::atom("vs_ok")>;

} // namespace varsync

namespace varsync {

/// A strategy's coordinator. Variables are addressed by the id that create /
/// lookup return.
using coordinator_actor = caf::typed_actor<
  caf::replies_to<create_atom, variable_spec>::with<variable_info>,
  caf::replies_to<lookup_atom, std::string>::with<variable_info>,
  caf::replies_to<list_atom>::with<std::vector<variable_info>>,
  caf::replies_to<destroy_atom, uint64_t>::with<ok_atom>,
  // Cross-replica context.
  caf::replies_to<read_atom, uint64_t>::with<tensor>,
  caf::replies_to<update_atom, uint64_t, update_op, tensor>::with<ok_atom>,
  // Sparse updates (S4): the op on the rows the slices name.
  caf::replies_to<scatter_atom, uint64_t, scatter_op,
                  indexed_slices>::with<ok_atom>,
  caf::replies_to<values_atom, uint64_t>::with<std::vector<tensor>>,
  // A replica step; per-replica results stay in the step object.
  caf::replies_to<run_atom, replica_step_ptr>::with<ok_atom>,
  // Batch all-reduce of per-replica values: inner vectors hold N values.
  caf::replies_to<allreduce_atom, reduce_op,
                  std::vector<std::vector<tensor>>>::with<std::vector<tensor>>,
  caf::replies_to<describe_atom>::with<strategy_description>,
  // Answers when a variable of this name exists (C10); times out after the
  // strategy's timeout.
  caf::replies_to<wait_for_atom, std::string>::with<variable_info>,
  // Answers when every process reached its barrier of the same number
  // (P14).
  caf::replies_to<barrier_atom>::with<ok_atom>,
  // The processes agree on an outcome: this process's error (or none) and
  // the operation in words (P15).
  caf::replies_to<agree_atom, caf::error, std::string>::with<ok_atom>,
  // A metrics snapshot (varsync/ext/metrics.hpp).
  caf::replies_to<metrics_atom>::with<strategy_metrics>,
  // Every process's snapshot, in rank order (M9; a collective, P4).
  caf::replies_to<process_metrics_atom>::with<std::vector<strategy_metrics>>>;

/// One replica as seen by an actor bound to it: replica-context reads and
/// updates of that replica's components outside a step (R1, N1; ON_WRITE
/// variables refuse local updates). Requests the replica would have to defer
/// beyond the strategy's max_queued_operations are answered `overloaded`
/// (V3). local_add adds a double, converted to the dtype, to a scalar
/// ON_READ or NONE component: no reply and no tensor per update; what is not
/// applied is counted in strategy_description::local_adds_dropped.
using replica_local_actor = caf::typed_actor<
  caf::replies_to<local_read_atom, uint64_t>::with<tensor>,
  caf::replies_to<local_update_atom, uint64_t, update_op,
                  tensor>::with<ok_atom>,
  // S3: a scatter into an ON_READ or NONE component.
  caf::replies_to<local_scatter_atom, uint64_t, scatter_op,
                  indexed_slices>::with<ok_atom>,
  caf::reacts_to<local_add_atom, uint64_t, double>>;

/// The checkpoint actor (varsync/ext/checkpoint_actor.hpp): save / restore /
/// save_survivors of the named variables (an empty list selects every
/// variable) to a file path. Each replies ok_atom or an error
/// (varsync/checkpoint.hpp).
using checkpoint_actor = caf::typed_actor<
  caf::replies_to<checkpoint_save_atom, std::string,
                  std::vector<std::string>>::with<ok_atom>,
  caf::replies_to<checkpoint_restore_atom, std::string,
                  std::vector<std::string>>::with<ok_atom>,
  caf::replies_to<checkpoint_save_survivors_atom, std::string,
                  std::vector<std::string>, bool>::with<ok_atom>>;

} // namespace varsync
