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
#include "devices/memory_budget.hpp"
#include "messages/coordinator_interface.hpp"

namespace varsync::detail {

class strategy_core {
public:
  strategy_core(std::unique_ptr<caf::actor_system_config> cfg,
                std::unique_ptr<caf::actor_system> owned, caf::actor_system& sys,
                coordinator_internal_actor coordinator,
                std::vector<replica_actor> replicas,
                std::vector<std::string> devices, std::string description,
                memory_budget budget = memory_budget{});
  ~strategy_core();

  caf::actor_system& system() { return *sys_; }
  const coordinator_internal_actor& coordinator() const { return coordinator_; }
  const std::vector<replica_actor>& replicas() const { return replicas_; }
  const std::vector<std::string>& devices() const { return devices_; }
  const std::string& description() const { return description_; }
  int num_replicas() const { return static_cast<int>(devices_.size()); }
  /// What the strategy's requests sized by the caller are checked against.
  const memory_budget& budget() const { return budget_; }

  /// Runs `op` on the coordinator's thread; `done` gets the outcome (or
  /// shut_down if the coordinator is gone before it ran the call).
  template <class T>
  void submit(std::function<void(coordinator_state&, reply_fn<T>)> op,
              reply_fn<T> done);

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
  memory_budget budget_;
  std::atomic<bool> stopped_{false};
};

} // namespace varsync::detail
