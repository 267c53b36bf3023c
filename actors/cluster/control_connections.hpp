#pragma once
// The control plane's connections between processes: sockets that varsync
// accepted or opened itself, and whose peer passed the rendezvous
// handshake (actors/cluster/peer_handshake.hpp), handed to CAF's network
// layer (BASP). CAF never listens on a port of its own, so no byte reaches it from a peer
// that did not prove the cluster token. Every connection handed over:
//   - refuses a message that claims more than control_limits::message_bytes
//     (CAF 0.17 sizes its read buffer to a header's claim before the
//     payload arrives): the connection is closed and nothing is allocated;
//   - is closed when its peer has not completed CAF's handshake within the
//     handshake timeout (CAF itself would keep it forever);
//   - counts towards open_count(), which process 0's gate caps.
// After CAF's handshake a silent connection is CAF's to close (its
// heartbeats and connection timeout, cluster_spec::peer_timeout).

#include <chrono>
#include <cstdint>
#include <memory>
#include <set>
#include <string>

#include <caf/actor_control_block.hpp>
#include <caf/actor_system.hpp>
#include <caf/expected.hpp>

namespace varsync {

struct control_limits {
  /// The most one control message may claim: four times the largest one
  /// varsync sends (a rendezvous store value of 1 MiB; services mode's
  /// operations carry at most by_value_bytes of tensor data inline,
  /// varsync/internal/by_value.hpp).
  static constexpr uint32_t message_bytes = uint32_t{4} << 20;
};

class control_connections
  : public std::enable_shared_from_this<control_connections> {
public:
  /// `sys` loads CAF's middleman with its default network backend.
  control_connections(caf::actor_system& sys,
                      std::chrono::milliseconds handshake_timeout);
  ~control_connections();
  control_connections(const control_connections&) = delete;
  control_connections& operator=(const control_connections&) = delete;

  /// Process 0: CAF takes `fd` (a proven peer) as a connection accepted at
  /// `port`, and answers its handshake with `published`. Takes the fd.
  void serve(int fd, uint16_t port, const caf::strong_actor_ptr& published,
             const std::set<std::string>& interface);

  /// What CAF's handshake with process 0 yields: its published actor.
  struct remote {
    caf::strong_actor_ptr actor;
    std::set<std::string> interface;
  };
  /// Another process: CAF takes `fd` (connected to process 0's `port`,
  /// proven) and runs its handshake within `timeout`. Takes the fd.
  caf::expected<remote> open(int fd, uint16_t port,
                             std::chrono::milliseconds timeout);

  /// Connections handed to CAF and not yet closed.
  size_t open_count() const;

  /// Closes, on CAF's network thread, the connections whose peer has not
  /// completed CAF's handshake within the handshake timeout. Call it
  /// periodically; returns at once.
  void reap();

  /// Lets go of every connection this object still follows (before the
  /// actor system goes).
  void release();

  struct tally; // shared with the connections CAF holds

private:
  caf::actor_system& sys_;
  std::shared_ptr<tally> tally_;
};

} // namespace varsync
