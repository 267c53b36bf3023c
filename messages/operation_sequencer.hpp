#pragma once
// The control plane of a strategy across processes
// (messages/sequenced_operation.hpp): process 0 runs the sequencer, every
// process a link to it. In services mode it orders operations; in both
// modes it tells every process when another one left (its link went down:
// it exited, was killed, or stopped answering heartbeats). A link forwards its
// process's operations to the sequencer; the sequencer numbers each one and
// sends it to every link in that order (CAF keeps the order of messages
// between two actors, over the network too); each link hands them to its
// strategy's coordinator.

#include <cstdint>

#include <caf/atom.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include "messages/sequenced_operation.hpp"
#include "varsync/actor_protocol.hpp"

namespace varsync {

using sequence_join_atom = caf::atom_constant<caf::atom("vs_sqjoin")>;
using sequence_submit_atom = caf::atom_constant<caf::atom("vs_sqsub")>;
using sequence_deliver_atom = caf::atom_constant<caf::atom("vs_sqdel")>;
using sequence_gone_atom = caf::atom_constant<caf::atom("vs_sqgone")>;
using sequence_leave_atom = caf::atom_constant<caf::atom("vs_sqleave")>;
using sequence_close_atom = caf::atom_constant<caf::atom("vs_sqclose")>;
using sequence_renew_atom = caf::atom_constant<caf::atom("vs_sqrenew")>;

/// One process's end: submit comes from its coordinator, deliver and gone
/// (rank, reason, orderly: it shut its strategy down) from the sequencer.
/// leave comes from its own process's orderly shutdown, which waits for the
/// answer (the sequencer has then heard it: a connection that closes
/// before the link's exit reaches process 0 is still an orderly leave);
/// close from the sequencer when process 0 shuts down, likewise.
using sequence_link_actor = caf::typed_actor<
  caf::reacts_to<sequence_submit_atom, sequenced_operation>,
  caf::reacts_to<sequence_deliver_atom, sequenced_operation>,
  caf::reacts_to<sequence_gone_atom, int32_t, std::string, bool>,
  caf::replies_to<sequence_leave_atom>::with<ok_atom>,
  caf::replies_to<sequence_close_atom>::with<ok_atom>>;

/// Process 0's sequencer. join(rank, link) answers once every rank has
/// joined; submissions of a link that has not joined are dropped. leave
/// (from a link) marks its process as leaving in order; close (from process
/// 0's shutdown) tells every other link, and answers once they heard it.
/// renew: its own timer, which keeps its lead under an arbiter (P16).
using operation_sequencer_actor = caf::typed_actor<
  caf::replies_to<sequence_join_atom, int32_t, sequence_link_actor>::with<
    ok_atom>,
  caf::reacts_to<sequence_submit_atom, sequenced_operation>,
  caf::replies_to<sequence_leave_atom>::with<ok_atom>,
  caf::replies_to<sequence_close_atom>::with<ok_atom>,
  caf::reacts_to<sequence_renew_atom>>;

} // namespace varsync
