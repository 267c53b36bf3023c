#pragma once
// Internal: what a strategy handle shares. Holds the actor system (owned or
// borrowed) and the coordinator, and sends client calls (closures run by the
// coordinator) so that callers outside the actor system never spawn a
// scoped_actor per call.

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>

#include "actors/coordinator_state.hpp"
#include "messages/coordinator_interface.hpp"

namespace varsync::detail {

class strategy_core {
public:
  strategy_core(std::unique_ptr<caf::actor_system_config> cfg,
                std::unique_ptr<caf::actor_system> owned, caf::actor_system& sys,
                coordinator_internal_actor coordinator,
                std::vector<replica_actor> replicas,
                std::vector<std::string> devices, std::string description,
                size_t max_queued_operations, size_t max_queued_bytes);
  ~strategy_core();

  caf::actor_system& system() { return *sys_; }
  const coordinator_internal_actor& coordinator() const { return coordinator_; }
  const std::vector<replica_actor>& replicas() const { return replicas_; }
  const std::vector<std::string>& devices() const { return devices_; }
  const std::string& description() const { return description_; }
  int num_replicas() const { return static_cast<int>(devices_.size()); }

  /// Runs `op` on the coordinator's thread; `done` gets the outcome (or
  /// shut_down if the coordinator is gone before it ran the call).
  /// `bytes`: the size of the call's tensor arguments. A call beyond the
  /// bounds on calls outstanding (sent, not yet answered) is answered
  /// `overloaded` at once and never sent (V3): the coordinator's mailbox
  /// holds at most the bounds.
  template <class T>
  void submit(std::function<void(coordinator_state&, reply_fn<T>)> op,
              reply_fn<T> done, size_t bytes = 0);

  /// Calls start(done) and waits up to `timeout` for done's outcome: a
  /// blocking call made of an asynchronous one.
  template <class T, class Start>
  caf::expected<T> await(std::chrono::milliseconds timeout, Start&& start);

  /// submit() and wait up to `timeout` for the outcome.
  template <class T>
  caf::expected<T>
  call(std::chrono::milliseconds timeout,
       std::function<void(coordinator_state&, reply_fn<T>)> op);

  void shutdown();
  bool stopped() const { return stopped_.load(); }

private:
  std::unique_ptr<caf::actor_system_config> cfg_;
  std::unique_ptr<caf::actor_system> owned_;
  caf::actor_system* sys_;
  coordinator_internal_actor coordinator_;
  std::vector<replica_actor> replicas_;
  std::vector<std::string> devices_;
  std::string description_;
  std::atomic<bool> stopped_{false};
  size_t max_queued_operations_;
  size_t max_queued_bytes_;
  /// Calls submitted whose done callback has not run yet, and the bytes of
  /// their tensor arguments (shared with the calls: a call may outlive the
  /// handle).
  struct outstanding {
    std::atomic<size_t> operations{0};
    std::atomic<size_t> bytes{0};
  };
  std::shared_ptr<outstanding> outstanding_ = std::make_shared<outstanding>();
};

} // namespace varsync::detail
