#pragma once
// The handshake at the rendezvous port, before any byte of CAF's protocol
// (docs/multiprocess.md, "The rendezvous port"). Fixed-size frames, so a
// peer has nothing to claim; the peer proves the cluster token by an HMAC
// of both sides' nonces, and process 0 proves it back, so the token never
// travels:
//
//   process 0 -> peer   hello    "VSGATE/1" | nonce0 (32)
//   peer -> process 0   answer   "VSGATE/1" | nonce1 (32)
//                                | HMAC(token, "peer" | nonce0 | nonce1)
//   process 0 -> peer   verdict  "VSGATEOK" | HMAC(token, "rank0" | ...)
//                             or "VSGATENO" | 32 zero bytes (wrong token)
//
// After "VSGATEOK" both sides hand the socket to CAF (BASP). Without a
// token the HMAC's key is empty: anyone can answer, and the frames still
// bound what a connection costs before CAF sees it.

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include <caf/error.hpp>

namespace varsync {

constexpr size_t gate_nonce_bytes = 32;
constexpr size_t gate_hello_bytes = 8 + gate_nonce_bytes;
constexpr size_t gate_answer_bytes = 8 + gate_nonce_bytes + 32;
constexpr size_t gate_verdict_bytes = 8 + 32;

using gate_nonce = std::array<uint8_t, gate_nonce_bytes>;

/// 32 bytes from the kernel's random source.
gate_nonce random_gate_nonce();

std::array<uint8_t, gate_hello_bytes> gate_hello(const gate_nonce& mine);

/// Process 0's check of a peer's answer to `mine`: the verdict frame to
/// send back, and whether the peer proved `token`.
struct gate_verdict {
  bool accepted = false;
  /// The answer did not start with the protocol's tag (not a varsync
  /// process, or another version).
  bool foreign = false;
  std::array<uint8_t, gate_verdict_bytes> frame{};
};
gate_verdict check_gate_answer(std::string_view token, const gate_nonce& mine,
                               std::span<const uint8_t, gate_answer_bytes>
                                 answer);

/// A peer's side: connects to host:port and proves `token` before
/// `deadline`. `fd` is the connected socket, ready for CAF's handshake
/// (the caller owns it), or -1 with `error` saying why.
struct gate_attempt {
  int fd = -1;
  caf::error error;
  /// Worth trying again before the deadline: nothing listens yet, or the
  /// port closed the connection before its verdict (it was full).
  bool retry = false;
  /// Accepted, then silent until the deadline.
  bool stalled = false;
};
gate_attempt prove_to_gate(const std::string& host, uint16_t port,
                           std::string_view token,
                           std::chrono::steady_clock::time_point deadline);

/// Sets the options CAF sets on its own sockets (no Nagle delay,
/// keepalive) and close-on-exec.
void tune_control_socket(int fd);

} // namespace varsync
