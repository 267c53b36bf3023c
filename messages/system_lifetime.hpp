#pragma once
// Ties the actors varsync spawns into an actor system to that system's
// lifetime. CAF 0.17's actor_system destructor first waits for every actor
// that is not hidden, with no hook before that wait: a strategy whose handle
// outlives the system keeps its actors running, so the destructor would wait
// forever. register_types installs a watch on the config: a thread hook
// learns each system the config builds, and a group module, which the
// destructor stops after that wait while the scheduler still runs, stops what
// was watched and waits for it (bounded). A strategy spawns its actors
// hidden where its system has a watch: the watch, not the first wait, is what
// waits for them.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <caf/actor_control_block.hpp>

namespace caf {
class actor_system;
class actor_system_config;
} // namespace caf

namespace varsync::detail {

class system_lifetime : public std::enable_shared_from_this<system_lifetime> {
public:
  /// The watch of `sys`, or null if its config did not go through
  /// register_types.
  static std::shared_ptr<system_lifetime> of(caf::actor_system& sys);

  /// Watches `actors` until each has terminated. If the system goes down
  /// while one is alive, `on_stop` runs first (it asks them to stop), then
  /// the system's destruction waits for them, at most `limit`. `what` names
  /// them in the log.
  void watch(std::vector<caf::strong_actor_ptr> actors, std::string what,
             std::function<void()> on_stop,
             std::chrono::milliseconds limit = std::chrono::seconds(10));

  /// The system's destructor reached the watch: stop and await what is
  /// watched. Called once, by the group module.
  void system_stopping();

  /// True once the system's destruction reached the watch.
  bool stopping() const;

private:
  struct entry {
    std::string what;
    std::function<void()> on_stop;
    std::chrono::milliseconds limit;
    size_t alive = 0;
  };

  void terminated(uint64_t id);

  mutable std::mutex mtx_;
  std::condition_variable cv_;
  std::map<uint64_t, entry> entries_;
  uint64_t next_id_ = 0;
  bool stopping_ = false;
};

/// Installs the watch on `cfg` (register_types calls it).
void watch_system_lifetime(caf::actor_system_config& cfg);

} // namespace varsync::detail
