#pragma once
// Every atom of varsync's actor protocol (CAF 0.17: at most 10 characters).

#include <caf/atom.hpp>

namespace varsync {

// Coordinator requests.
using create_atom = caf::atom_constant<caf::atom("vs_create")>;
using lookup_atom = caf::atom_constant<caf::atom("vs_lookup")>;
using list_atom = caf::atom_constant<caf::atom("vs_list")>;
using destroy_atom = caf::atom_constant<caf::atom("vs_destroy")>;
using read_atom = caf::atom_constant<caf::atom("vs_read")>;
using update_atom = caf::atom_constant<caf::atom("vs_update")>;
using values_atom = caf::atom_constant<caf::atom("vs_values")>;
using run_atom = caf::atom_constant<caf::atom("vs_run")>;
using allreduce_atom = caf::atom_constant<caf::atom("vs_allred")>;
using describe_atom = caf::atom_constant<caf::atom("vs_desc")>;
using replicas_atom = caf::atom_constant<caf::atom("vs_replica")>;
using client_atom = caf::atom_constant<caf::atom("vs_client")>;
using shutdown_atom = caf::atom_constant<caf::atom("vs_stop")>;
/// Internal: the coordinator's timer tick for operation deadlines.
using deadline_atom = caf::atom_constant<caf::atom("vs_dline")>;

// Replica requests: components (sent by the coordinator).
using component_create_atom = caf::atom_constant<caf::atom("vs_ccreate")>;
using component_destroy_atom = caf::atom_constant<caf::atom("vs_cdrop")>;
using component_read_atom = caf::atom_constant<caf::atom("vs_cread")>;
using component_update_atom = caf::atom_constant<caf::atom("vs_cupdate")>;
using component_split_atom = caf::atom_constant<caf::atom("vs_csplit")>;
using step_atom = caf::atom_constant<caf::atom("vs_step")>;

// Replica requests: the three phases of a host collective.
using collective_enter_atom = caf::atom_constant<caf::atom("vs_center")>;
using collective_work_atom = caf::atom_constant<caf::atom("vs_cwork")>;
using collective_leave_atom = caf::atom_constant<caf::atom("vs_cleave")>;

// Replica requests from actors bound to that replica (replica context
// outside a step): local reads and local updates.
using local_read_atom = caf::atom_constant<caf::atom("vs_lread")>;
using local_update_atom = caf::atom_constant<caf::atom("vs_lupdate")>;

/// Internal: a delayed replica resumes its next deferred operation.
using resume_atom = caf::atom_constant<caf::atom("vs_resume")>;

using ok_atom = caf::atom_constant<caf::atom("vs_ok")>;

} // namespace varsync
