#pragma once
// Process 0's rendezvous port: a listener of varsync's own, in front of
// CAF (docs/multiprocess.md, "The rendezvous port"). A thread accepts each
// connection, runs the handshake of actors/cluster/peer_handshake.hpp within a
// deadline, and hands the connections whose peer proved the cluster token
// to CAF (control_connections); it closes the others and logs why. What
// any peer can cost process 0 is bounded: rendezvous_gate_limits below, and
// control_limits for the connections CAF holds.

#include <chrono>
#include <cstdint>
#include <memory>
#include <set>
#include <string>

#include <caf/actor_control_block.hpp>
#include <caf/expected.hpp>

namespace varsync {

class control_connections;

struct rendezvous_gate_limits {
  /// Connections in their handshake at once; more are closed at once.
  static constexpr size_t handshaking = 64;
  /// A connection must complete the handshake within the join timeout, and
  /// within this at most.
  static constexpr std::chrono::milliseconds handshake_timeout{5000};
  /// Connections CAF may hold beyond one per other process (a process that
  /// tries again while its earlier connection closes).
  static constexpr size_t spare_connections = 4;
};

struct rendezvous_gate_options {
  std::string host = "127.0.0.1";
  /// 0: a free port (tests).
  uint16_t port = 0;
  /// Empty: no token (every peer that completes the handshake is admitted).
  std::string token;
  std::chrono::milliseconds handshake_timeout
    = rendezvous_gate_limits::handshake_timeout;
  /// Connections CAF may hold at once (open_count of `connections`).
  size_t max_connections = 1 + rendezvous_gate_limits::spare_connections;
};

class rendezvous_gate {
public:
  /// Listens on options.host:port; an error names the address when it
  /// cannot. Admitted peers reach `published` (its `interface`).
  static caf::expected<std::unique_ptr<rendezvous_gate>>
  open(rendezvous_gate_options options,
       std::shared_ptr<control_connections> connections,
       caf::strong_actor_ptr published, std::set<std::string> interface);

  ~rendezvous_gate();
  rendezvous_gate(const rendezvous_gate&) = delete;
  rendezvous_gate& operator=(const rendezvous_gate&) = delete;

  /// The port it listens on.
  uint16_t port() const;

  /// True when the listener's address is a loopback one.
  bool loopback() const;

  /// Stops the thread and closes the listener and every connection still
  /// in its handshake (those handed to CAF stay CAF's). Idempotent.
  void stop();

  struct state;

private:
  explicit rendezvous_gate(std::unique_ptr<state> s);
  std::unique_ptr<state> state_;
};

} // namespace varsync
