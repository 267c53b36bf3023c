#include "actors/process_collective_actor.hpp"

#include <memory>
#include <utility>

#include <caf/actor_system.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "core/logging.hpp"
#include "sync/cross_process_collective.hpp"
#include "varsync/error.hpp"

namespace varsync {

namespace {

class process_collective_impl : public collective_driver_actor::base {
public:
  process_collective_impl(caf::actor_config& cfg, process_membership m)
    : collective_driver_actor::base(cfg), m_(std::move(m)) {
  }

  behavior_type make_behavior() override {
    return {
      [this](collective_work_atom,
             const collective_plan_ptr& plan) -> caf::result<ok_atom> {
        if (!m_.group)
          return make_error(errc::shut_down, "the process group is closed");
        if (!prepared_) { // this actor's own thread
          m_.group->block_signals();
          prepared_ = true;
        }
        if (auto err = run_cross_process(*plan, *m_.group, m_.replicas_per_rank)) {
          log()->debug("collective across processes failed: {}",
                      describe(err));
          return err;
        }
        return ok_atom::value;
      },
    };
  }

  void on_exit() override {
    // The group's connections close with the actor, not with the last
    // reference to a message.
    m_.group.reset();
  }

private:
  process_membership m_;
  bool prepared_ = false;
};

} // namespace

collective_driver spawn_process_collective(caf::actor_system& sys,
                                           process_membership membership) {
  collective_driver out;
  out.description = membership.group->describe() + ", "
                    + std::to_string(membership.total_replicas)
                    + " replicas in all";
  out.actor = sys.spawn<process_collective_impl, caf::detached>(
    std::move(membership));
  return out;
}

} // namespace varsync
