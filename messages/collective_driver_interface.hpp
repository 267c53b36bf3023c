#pragma once
// The typed interface of a strategy's device collective driver: one actor
// (on its own thread) that runs the work phase of every collective of a
// strategy with CUDA replicas for all replicas at once, so that the calls of
// all NCCL ranks are issued from one place, inside one NCCL group (issued
// one rank at a time from actors sharing scheduler threads, they can
// deadlock). The coordinator is its only sender; the replicas have entered
// the collective (published their pointers and step-done events) before the
// request.

#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include "messages/atoms.hpp"
#include "messages/collective.hpp"

namespace varsync {

using collective_driver_actor = caf::typed_actor<
  caf::replies_to<collective_work_atom, collective_run_ptr>::with<ok_atom>>;

} // namespace varsync
