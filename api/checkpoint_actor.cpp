#include "varsync/ext/checkpoint_actor.hpp"

#include <chrono>
#include <memory>

#include <caf/actor_system.hpp>
#include <caf/exit_reason.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "varsync/error.hpp"
#include "varsync/checkpoint.hpp"
#include "api/strategy_access.hpp"
#include "api/strategy_core.hpp"

namespace varsync {

namespace {

caf::result<ok_atom> to_result(caf::error err) {
  if (err)
    return err;
  return ok_atom::value;
}

// Serves exactly one request on a thread of its own, then quits.
checkpoint_actor::behavior_type worker(checkpoint_actor::pointer self,
                                       strategy s) {
  return {
    [=](checkpoint_save_atom, const std::string& path,
        const std::vector<std::string>& names) -> caf::result<ok_atom> {
      self->quit();
      return to_result(save(s, path, names));
    },
    [=](checkpoint_restore_atom, const std::string& path,
        const std::vector<std::string>& names) -> caf::result<ok_atom> {
      self->quit();
      return to_result(restore(s, path, names));
    },    [=](checkpoint_save_survivors_atom, const std::string& path,
        const std::vector<std::string>& names,
        bool aggregate) -> caf::result<ok_atom> {
      self->quit();
      survivor_options options;
      options.aggregate_survivors = aggregate;
      return to_result(save_survivors(s, path, names, options));
    },
  };
}

// Holds the strategy weakly: an actor of the strategy's own system must not
// keep it alive (its last handle would then go away on a scheduler thread).
// Stops with the coordinator: an owned actor system's destructor waits for
// every actor, so one left running would hang the strategy's shutdown.
checkpoint_actor::behavior_type
front(checkpoint_actor::pointer self,
      std::weak_ptr<detail::strategy_core> weak,
      std::chrono::milliseconds timeout, coordinator_actor coordinator) {
  self->monitor(coordinator);
  self->set_down_handler([self](caf::down_msg&) {
    self->quit(caf::exit_reason::user_shutdown);
  });
  auto start = [=]() -> caf::expected<checkpoint_actor> {
    auto core = weak.lock();
    if (!core)
      return make_error(errc::shut_down,
                        "checkpoint: the strategy is shut down");
    return self->system().spawn<caf::detached>(
      worker, detail::strategy_access::handle(std::move(core), timeout));
  };
  return {
    [=](checkpoint_save_atom a, const std::string& path,
        const std::vector<std::string>& names) -> caf::result<ok_atom> {
      auto w = start();
      if (!w)
        return w.error();
      return self->delegate(*w, a, path, names);
    },
    [=](checkpoint_restore_atom a, const std::string& path,
        const std::vector<std::string>& names) -> caf::result<ok_atom> {
      auto w = start();
      if (!w)
        return w.error();
      return self->delegate(*w, a, path, names);
    },    [=](checkpoint_save_survivors_atom a, const std::string& path,
        const std::vector<std::string>& names,
        bool aggregate) -> caf::result<ok_atom> {
      auto w = start();
      if (!w)
        return w.error();
      return self->delegate(*w, a, path, names, aggregate);
    },
  };
}

} // namespace

checkpoint_actor spawn_checkpoint_actor(const strategy& s) {
  const auto& core = detail::strategy_access::core(s);
  if (core->system_destroyed())
    return checkpoint_actor{};
  auto& sys = core->system();
  auto hdl = sys.spawn(front, std::weak_ptr<detail::strategy_core>{core},
                       s.timeout(), core->coordinator());
  if (core->owns_system())
    detail::forget_thread_logger(sys);
  return hdl;
}

} // namespace varsync
