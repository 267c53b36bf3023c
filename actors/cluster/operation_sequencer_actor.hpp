#pragma once
// The actors behind services mode's control plane
// (messages/operation_sequencer.hpp): process 0's sequencer and each
// process's link to it. Both live in the control plane's own actor system.

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include <caf/actor_system.hpp>

#include "actors/cluster/sequencer_lead.hpp"
#include "messages/operation_sequencer.hpp"
#include "sync/transport/process_group.hpp"

namespace varsync {

/// Where a link hands the ordered operations: the receiver the coordinator
/// attaches, or a queue until it does. Shared by the link and its group.
class sequence_endpoint {
public:
  /// `orders_here`: this process runs the sequencer (it alone learns that
  /// it was fenced as `fenced`; the others that their sequencer is lost).
  explicit sequence_endpoint(bool orders_here = false)
    : orders_here_(orders_here) {}

  void attach(sequence_receiver receiver);
  void deliver(sequenced_operation op);
  /// Once: later deliveries are dropped.
  void fail(caf::error reason);
  /// Another process left the strategy (the sequencer says so); orderly:
  /// it shut its strategy down, rather than died or stopped answering.
  void peer_left(int rank, const std::string& reason, bool orderly);
  /// Process 0 said it shuts down in order: when its connection closes,
  /// that is no crash. Changes nothing until then (operations in flight
  /// finish as they would).
  void sequencer_closing();
  /// Called (once) when this process loses the strategy: the sequencer is
  /// gone or another process left; orderly as for peer_left. Set before
  /// the link starts.
  void on_lost(std::function<void(caf::error, bool orderly)> fn);

private:
  std::mutex mtx_;
  sequence_receiver receiver_;
  bool attached_ = false;
  std::deque<sequenced_operation> early_;
  caf::error failure_;
  bool failed_ = false;
  std::function<void(caf::error, bool)> lost_;
  bool lost_called_ = false;
  bool closing_ = false;
  const bool orders_here_;

  void lose(caf::error reason, bool orderly); // under the lock
};

/// Counts the processes other than 0 whose link is gone, for process 0's
/// shutdown (process_group::await_others_left).
class departures {
public:
  explicit departures(int others) : others_(others) {}
  void left();
  /// This process orders nothing any more (its sequencer was fenced): no
  /// other process waits for it, so its shutdown waits for none.
  void stop_waiting();
  bool await_all(std::chrono::milliseconds limit);

private:
  std::mutex mtx_;
  std::condition_variable cv_;
  int others_;
};

/// The sequencer of `world_size` processes; it reports the other
/// processes' links going down to `gone`. Under an arbiter, it orders
/// under `lead`'s epoch while it can renew it, and stops with `fenced`
/// once it cannot (P16).
operation_sequencer_actor
spawn_operation_sequencer(caf::actor_system& sys, int world_size,
                          std::shared_ptr<departures> gone,
                          sequencer_lead lead = {});

/// A process's link: forwards its submissions to `sequencer` and its
/// deliveries to `endpoint`; a lost sequencer fails the endpoint.
sequence_link_actor
spawn_sequence_link(caf::actor_system& sys, operation_sequencer_actor sequencer,
                    std::shared_ptr<sequence_endpoint> endpoint);

} // namespace varsync
