#include "varsync/ext/checkpoint_actor.hpp"

#include <chrono>
#include <memory>

#include <caf/actor_system.hpp>
#include <caf/exit_reason.hpp>
#include <caf/logger.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "varsync/actor_api.hpp"
#include "varsync/checkpoint.hpp"
#include "varsync/error.hpp"

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
    },
    [=](checkpoint_save_survivors_atom, const std::string& path,
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
front(checkpoint_actor::pointer self, weak_strategy weak,
      coordinator_actor coordinator) {
  self->monitor(coordinator);
  self->set_down_handler([self](caf::down_msg&) {
    self->quit(caf::exit_reason::user_shutdown);
  });
  auto start = [=]() -> caf::expected<checkpoint_actor> {
    auto s = weak.lock();
    if (!s)
      return make_error(errc::shut_down,
                        "checkpoint: the strategy is shut down");
    return self->system().spawn<caf::detached>(worker, std::move(*s));
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
    },
    [=](checkpoint_save_survivors_atom a, const std::string& path,
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
  auto coordinator = coordinator_of(s);
  if (!coordinator)
    return checkpoint_actor{};
  auto& sys = coordinator->home_system();
  // spawn makes `sys` this thread's logging system; a thread that had none
  // keeps none, or it would point at a system the strategy may destroy.
  auto* logger_before = caf::logger::current_logger();
  auto hdl = sys.spawn(front, weak_strategy{s}, std::move(coordinator));
  if (logger_before == nullptr)
    caf::logger::set_current_actor_system(nullptr);
  return hdl;
}

} // namespace varsync
