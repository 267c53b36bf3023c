#pragma once
// The internal atoms of varsync's actor protocol, beside the public ones
// (CAF 0.17: at most 10 characters).

#include <caf/atom.hpp>

#include "varsync/actor_protocol.hpp"

namespace varsync {

// Coordinator: internal requests.
using replicas_atom = caf::atom_constant<caf::atom("vs_replica")>;
using client_atom = caf::atom_constant<caf::atom("vs_client")>;
using client_now_atom = caf::atom_constant<caf::atom("vs_cnow")>;
using shutdown_atom = caf::atom_constant<caf::atom("vs_stop")>;
/// Services mode: an operation process 0 ordered, and the sequencer lost.
using sequenced_atom = caf::atom_constant<caf::atom("vs_seqd")>;
using sequencer_down_atom = caf::atom_constant<caf::atom("vs_seqdn")>;
/// The coordinator sends the writes that queued (group commit).
using flush_writes_atom = caf::atom_constant<caf::atom("vs_wflush")>;
/// The coordinator's timer tick for operation deadlines.
using deadline_atom = caf::atom_constant<caf::atom("vs_dline")>;
/// Write the flight recorder to a file (M8): its reason and detail.
using flight_dump_atom = caf::atom_constant<caf::atom("vs_fdump")>;

// Replica: the coordinator binds its replicas first; afterwards a replica
// accepts component, step and collective messages from it alone.
using bind_atom = caf::atom_constant<caf::atom("vs_bind")>;

// Replica requests: components (sent by the coordinator).
using component_create_atom = caf::atom_constant<caf::atom("vs_ccreate")>;
using component_destroy_atom = caf::atom_constant<caf::atom("vs_cdrop")>;
using component_read_atom = caf::atom_constant<caf::atom("vs_cread")>;
using component_update_atom = caf::atom_constant<caf::atom("vs_cupdate")>;
using component_split_atom = caf::atom_constant<caf::atom("vs_csplit")>;
using component_scatter_atom = caf::atom_constant<caf::atom("vs_cscat")>;
/// Cross-replica writes that queued, as one message (group commit).
using component_writes_atom = caf::atom_constant<caf::atom("vs_cwrites")>;
using step_atom = caf::atom_constant<caf::atom("vs_step")>;
/// A small step's combined updates, applied by every replica all or none.
using step_apply_atom = caf::atom_constant<caf::atom("vs_sapply")>;
/// The coordinator is done with step S (applied, failed or abandoned): the
/// replica releases the staging buffers of S's device contributions.
using step_release_atom = caf::atom_constant<caf::atom("vs_sfree")>;
/// A coroutine step waiting at a collective inside the step (X2) goes on
/// with the collective's result ...
using step_resume_atom = caf::atom_constant<caf::atom("vs_sresume")>;
/// ... or is abandoned (another replica failed, mismatched, or the step's
/// deadline passed); also for a step that has not started here yet.
using step_abort_atom = caf::atom_constant<caf::atom("vs_sabort")>;

// Replica requests: the three phases of a host collective.
using collective_enter_atom = caf::atom_constant<caf::atom("vs_center")>;
using collective_work_atom = caf::atom_constant<caf::atom("vs_cwork")>;
using collective_leave_atom = caf::atom_constant<caf::atom("vs_cleave")>;

/// A replica's counts for a metrics snapshot (messages/replica_usage.hpp).
using usage_atom = caf::atom_constant<caf::atom("vs_usage")>;

/// A delayed replica resumes its next deferred operation (fault injection).
using resume_atom = caf::atom_constant<caf::atom("vs_resume")>;

} // namespace varsync
