#include "actors/collective_driver_actor.hpp"

#include <utility>

#include <caf/actor_system.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "actors/spawn_hidden.hpp"
#include "varsync/error.hpp"

namespace varsync {

namespace {

class collective_driver_impl : public collective_driver_actor::base {
public:
  collective_driver_impl(caf::actor_config& cfg,
                         std::shared_ptr<collective_algorithm> algorithm)
    : collective_driver_actor::base(cfg), algorithm_(std::move(algorithm)) {
  }

  behavior_type make_behavior() override {
    return {
      [this](collective_work_atom,
             const collective_run_ptr& run) -> caf::result<ok_atom> {
        if (!algorithm_)
          return make_error(errc::shut_down, "the collective is closed");
        if (auto err = algorithm_->run(*run->plan, run->buffers, 0, 1))
          return err;
        return ok_atom::value;
      },
    };
  }

  void on_exit() override {
    algorithm_.reset();
  }

private:
  std::shared_ptr<collective_algorithm> algorithm_;
};

} // namespace

collective_driver_actor
spawn_collective_driver(caf::actor_system& sys,
                        std::shared_ptr<collective_algorithm> algorithm,
                        bool hidden) {
  return spawn_maybe_hidden<collective_driver_impl, caf::detached>(
    sys, hidden, std::move(algorithm));
}

} // namespace varsync
