#pragma once
// The atoms of varsync's public actor protocol (CAF 0.17 atoms: at most 10
// characters). Internal atoms live beside the implementation.

#include <caf/atom.hpp>

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
using wait_for_atom = caf::atom_constant<caf::atom("vs_waitfor")>;
using barrier_atom = caf::atom_constant<caf::atom("vs_barrier")>;

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
