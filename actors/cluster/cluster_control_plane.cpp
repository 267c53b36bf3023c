#include "actors/cluster/cluster_control_plane.hpp"

#include <exception>
#include <string>

#include <caf/actor_system_config.hpp>
#include <caf/io/middleman.hpp>

#include "varsync/config.hpp"
#include "varsync/error.hpp"

namespace varsync {

control_system::control_system(std::chrono::milliseconds peer_timeout)
  : peer_timeout_(peer_timeout) {
}

caf::error control_system::start() {
  thread_ = std::thread{[this] { run(); }};
  std::unique_lock<std::mutex> lock{mtx_};
  cv_.wait(lock, [this] { return state_ != state::starting; });
  return std::move(error_);
}

control_system::~control_system() {
  {
    std::lock_guard<std::mutex> lock{mtx_};
    if (state_ == state::running)
      state_ = state::released;
    cv_.notify_all();
  }
  if (thread_.joinable())
    thread_.join();
}

void control_system::run() {
  caf::actor_system_config cfg;
  register_types(cfg);
  // Services mode relays every operation through this system: its idle
  // worker must wake when work arrives, not after a polling sleep.
  tune_scheduler(cfg);
  cfg.load<caf::io::middleman>();
  cfg.set("scheduler.max-threads", 1);
  cfg.set("logger.verbosity", caf::atom("quiet"));
  if (peer_timeout_.count() > 0) {
    // CAF's middleman sends the heartbeats from its own thread and closes
    // a connection that stayed silent past the timeout: the proxies of
    // that process's actors go down, and their monitors hear of it.
    cfg.set("middleman.heartbeat-interval",
            caf::timespan{peer_timeout_ / 4});
    cfg.set("middleman.connection-timeout", caf::timespan{peer_timeout_});
  }
  try {
    sys_ = std::make_unique<caf::actor_system>(cfg);
  } catch (const std::exception& e) {
    std::lock_guard<std::mutex> lock{mtx_};
    error_ = make_error(errc::invalid_argument,
                        std::string{"cannot start the control plane: "}
                          + e.what());
    state_ = state::failed;
    cv_.notify_all();
    return;
  }
  {
    std::unique_lock<std::mutex> lock{mtx_};
    state_ = state::running;
    cv_.notify_all();
    cv_.wait(lock, [this] { return state_ == state::released; });
  }
  // Last registered, first run (the link before the sequencer).
  for (auto i = before_destroy_.rbegin(); i != before_destroy_.rend(); ++i)
    (*i)();
  sys_.reset();
}

} // namespace varsync
