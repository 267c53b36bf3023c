#pragma once
// The control plane of the processes of a strategy, over CAF's network
// layer: its own small actor system (control_system), the health that
// fails every later collective once a process is lost (group_health), and
// the control_plane of sync/transport/control_plane.hpp that the joiner hands to
// process_group (cluster_control_plane: the sequencer's link, departures,
// health). The joiner (gloo_process_group.cpp) fills it in; the sequencer
// and its links are operation_sequencer_actor.hpp's, the rendezvous store
// and gate rendezvous_store_actor.hpp's and rendezvous_gate.hpp's.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/error.hpp>
#include <caf/send.hpp>

#include "actors/cluster/operation_sequencer_actor.hpp"
#include "sync/transport/control_plane.hpp"

namespace varsync {

class arbiter;

// The control plane's own small actor system (CAF's network layer loaded),
// so that a strategy embedded in a user's system needs nothing from it. CAF
// 0.17 wants a system destroyed by the thread that built it: a thread of
// its own builds it, keeps it until the group goes, then destroys it.
class control_system {
public:
  explicit control_system(std::chrono::milliseconds peer_timeout);
  ~control_system();
  control_system(const control_system&) = delete;
  control_system& operator=(const control_system&) = delete;

  /// Starts the system on its thread; its error if it could not start.
  caf::error start();

  caf::actor_system& sys() { return *sys_; }

  /// Runs on the system's thread before it is destroyed (stop actors); the
  /// last registered runs first.
  void on_destroy(std::function<void()> fn) {
    before_destroy_.push_back(std::move(fn));
  }

private:
  enum class state { starting, running, released, failed };

  void run();

  std::chrono::milliseconds peer_timeout_;
  std::thread thread_;
  std::mutex mtx_;
  std::condition_variable cv_;
  state state_ = state::starting;
  caf::error error_;
  std::unique_ptr<caf::actor_system> sys_;
  std::vector<std::function<void()>> before_destroy_;
};

// Set once, by the control plane, when this process loses the strategy
// (another process left, or process 0 is unreachable); read before every
// collective.
class group_health {
public:
  void lose(caf::error reason) {
    std::lock_guard<std::mutex> lock{mtx_};
    if (!failure_)
      failure_ = std::move(reason);
    lost_.store(true);
  }
  caf::error failure() const {
    if (!lost_.load())
      return {};
    std::lock_guard<std::mutex> lock{mtx_};
    return failure_;
  }

private:
  mutable std::mutex mtx_;
  std::atomic<bool> lost_{false};
  caf::error failure_;
};

// The control plane over CAF's network layer: the sequencer's link (both
// modes: it watches the others), departures (process 0) and health.
class cluster_control_plane final : public control_plane {
public:
  // Destroyed last of the group: the transport joined through its store.
  std::unique_ptr<control_system> control;
  // Services mode.
  std::shared_ptr<sequence_endpoint> endpoint;
  std::optional<sequence_link_actor> link;
  /// Tells the others this process leaves in order (once; leave() and the
  /// control system's teardown).
  std::function<void()> leave_in_order;
  std::shared_ptr<departures> gone; // process 0
  /// The arbiter named (P16): process 0's sequencer renews its lead in it;
  /// the others keep it open for the day they must take over.
  std::shared_ptr<varsync::arbiter> arbiter;
  std::shared_ptr<group_health> health = std::make_shared<group_health>();

  void attach_sequencer(sequence_receiver receiver) override {
    if (endpoint)
      endpoint->attach(std::move(receiver));
  }
  void submit(sequenced_operation op) override {
    if (link)
      caf::anon_send(*link, sequence_submit_atom::value, std::move(op));
  }
  bool await_others_left(std::chrono::milliseconds limit) override {
    return !gone || gone->await_all(limit);
  }
  void leave() override {
    if (leave_in_order)
      leave_in_order();
  }
  caf::error failure() const override { return health->failure(); }
};

} // namespace varsync
