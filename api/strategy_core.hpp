#pragma once
// Internal: what a strategy handle shares. Holds the actor system (owned or
// borrowed) and the coordinator, and sends client calls (an operation as a
// value and its completion, messages/client_call.hpp) so that callers outside the actor system never spawn a
// scoped_actor per call.

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/expected.hpp>

#include "devices/memory_budget.hpp"
#include "messages/coordinator_interface.hpp"
#include "sync/transport/process_group.hpp"

namespace varsync::detail {

/// An actor system that a strategy creates itself, on a thread of its own
/// that also destroys it (see strategy.cpp).
class system_host;

/// Starts a thread that builds an actor system from `cfg` and keeps it until
/// the strategy releases it.
caf::expected<std::shared_ptr<system_host>>
start_system_host(std::unique_ptr<caf::actor_system_config> cfg);

caf::actor_system& system_of(system_host& host);

/// Releases a host whose strategy was never created and waits until its
/// actor system is gone (a failed strategy::create).
void discard_system_host(system_host& host);

/// CAF 0.17 keeps a reference to the logger of the last actor system that a
/// thread spawned into, and that system's destructor waits until each such
/// thread lets go of it: a user's thread that spawned into an owned system
/// (creating a strategy does) would hold up its shutdown until it exits.
/// Drops the calling thread's reference if it is `sys`'s.
void forget_thread_logger(caf::actor_system& sys);

class strategy_core {
public:
  strategy_core(std::shared_ptr<system_host> owned, caf::actor_system& sys,
                coordinator_internal_actor coordinator,
                std::vector<replica_actor> replicas,
                std::vector<std::string> devices, std::string description,
                memory_budget budget, size_t max_queued_operations,
                size_t max_queued_bytes);
  ~strategy_core();

  caf::actor_system& system() { return *sys_; }
  const coordinator_internal_actor& coordinator() const { return coordinator_; }
  const std::vector<replica_actor>& replicas() const { return replicas_; }
  const std::vector<std::string>& devices() const { return devices_; }
  const std::string& description() const { return description_; }
  int num_local_replicas() const { return static_cast<int>(devices_.size()); }
  /// Where this process stands among the strategy's processes.
  struct process_place {
    int rank = 0;
    int processes = 1;
    int first_replica = 0;
    int total_replicas = 0;
    cluster_mode mode = cluster_mode::training;
    /// The processes' group: the shutdown leaves it in order
    /// (process_group::leave), process 0 of services mode after waiting
    /// (at most leave_timeout) for the others to leave first.
    std::shared_ptr<process_group> group;
    bool waits_for_others = false;
    std::chrono::milliseconds leave_timeout{0};
  };
  /// Set once, before the core is shared.
  process_place place;
  int num_replicas() const {
    return place.total_replicas > 0 ? place.total_replicas
                                    : num_local_replicas();
  }
  /// What the strategy's requests sized by the caller are checked against.
  const memory_budget& budget() const { return budget_; }

  /// Hands `op` to the coordinator's dispatch with `timeout`; `done` gets
  /// the outcome (or shut_down if the coordinator is gone before it ran the
  /// call). A call beyond the bounds on calls outstanding (sent, not yet
  /// answered) is answered `overloaded` at once and never sent (V3): the
  /// coordinator's mailbox holds at most the bounds.
  template <class Op>
  void submit(Op op, caf::timespan timeout, reply_fn<result_of<Op>> done);

  /// Runs `op` on the coordinator's thread at once, never queued behind
  /// operations nor refused (metrics snapshots: small and read-only).
  template <class Op>
  void submit_now(Op op, caf::timespan timeout, reply_fn<result_of<Op>> done);

  /// A metrics snapshot, with the API's own counts (calls outstanding,
  /// calls refused) added.
  void metrics(reply_fn<strategy_metrics> done);


  /// Calls start(done) and waits up to `timeout` for done's outcome: a
  /// blocking call made of an asynchronous one.
  template <class T, class Start>
  caf::expected<T> await(std::chrono::milliseconds timeout, Start&& start);

  /// would_block if the calling thread must not wait for the strategy: it
  /// runs one of varsync's actors (async callbacks, replica steps) or is a
  /// scheduler thread of the strategy's actor system (an actor). Every
  /// blocking call goes through await(), which checks this first.
  caf::error check_may_block() const;

  void shutdown();
  bool stopped() const { return stopped_.load(); }
  /// The strategy's actor system is being destroyed while this core is held
  /// (messages/system_lifetime.hpp): shuts down; the system is never touched
  /// again.
  void system_gone();
  bool system_destroyed() const { return system_gone_.load(); }
  /// What a call after shutdown fails with.
  caf::error shut_down_error() const;
  /// True if the strategy created its actor system itself.
  bool owns_system() const { return owned_ != nullptr; }

private:
  std::shared_ptr<system_host> owned_;
  caf::actor_system* sys_;
  // The scheduler threads of sys_ (CAF's own policies; empty for others).
  std::vector<std::thread::id> scheduler_threads_;
  coordinator_internal_actor coordinator_;
  std::vector<replica_actor> replicas_;
  std::vector<std::string> devices_;
  std::string description_;
  memory_budget budget_;
  std::atomic<bool> stopped_{false};
  std::atomic<bool> system_gone_{false};
  // The thread that created the strategy: the only one that waits for an
  // owned actor system to go away (any other thread may be one of the
  // system's own, which the system's destructor would wait for).
  std::thread::id owner_ = std::this_thread::get_id();
  size_t max_queued_operations_;
  size_t max_queued_bytes_;
  /// Calls submitted whose done callback has not run yet, and the bytes of
  /// their tensor arguments (shared with the calls: a call may outlive the
  /// handle).
  std::shared_ptr<outstanding_calls> outstanding_
    = std::make_shared<outstanding_calls>();
};

} // namespace varsync::detail
