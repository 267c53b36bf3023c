#include "actors/cuda/collective_driver_actor.hpp"

#include <memory>
#include <utility>

#include <caf/actor_system.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "varsync/error.hpp"
#include "core/logging.hpp"
#include "sync/collective_plan.hpp"
#include "sync/nccl/cuda_collective.hpp"

namespace varsync {

namespace {

class collective_driver_impl : public collective_driver_actor::base {
public:
  collective_driver_impl(caf::actor_config& cfg,
                         std::shared_ptr<cuda_collective> collective)
    : collective_driver_actor::base(cfg), collective_(std::move(collective)) {
  }

  behavior_type make_behavior() override {
    return {
      [this](collective_work_atom,
             const collective_plan_ptr& plan) -> caf::result<ok_atom> {
        if (auto err = collective_->run(*plan)) {
          log()->error("device collective failed: {}", describe(err));
          return err;
        }
        return ok_atom::value;
      },
    };
  }

  void on_exit() override {
    // The GPUs' streams, scratch memory and NCCL communicators go away with
    // the actor's thread, not with the last message reference.
    collective_.reset();
  }

private:
  std::shared_ptr<cuda_collective> collective_;
};

} // namespace

caf::expected<collective_driver>
spawn_collective_driver(caf::actor_system& sys,
                        const std::vector<device_id>& devices) {
  auto collective = cuda_collective::create(devices);
  if (!collective)
    return std::move(collective.error());
  std::shared_ptr<cuda_collective> shared{std::move(*collective)};
  collective_driver out;
  out.description = shared->description();
  out.actor = sys.spawn<collective_driver_impl, caf::detached>(shared);
  log()->info("device collective: {}", out.description);
  return out;
}

} // namespace varsync
