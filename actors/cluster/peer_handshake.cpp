#include "actors/cluster/peer_handshake.hpp"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <random>

#include "actors/cluster/hmac_sha256.hpp"
#include "varsync/error.hpp"

namespace varsync {

namespace {

using clock = std::chrono::steady_clock;

constexpr std::string_view hello_tag = "VSGATE/1";
constexpr std::string_view accepted_tag = "VSGATEOK";
constexpr std::string_view refused_tag = "VSGATENO";
// Distinct labels: neither side's proof can be replayed as the other's.
constexpr std::string_view peer_label = "varsync gate: peer";
constexpr std::string_view rank0_label = "varsync gate: process 0";

std::span<const uint8_t> bytes_of(std::string_view s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

bool starts_with(std::span<const uint8_t> frame, std::string_view tag) {
  return frame.size() >= tag.size()
         && std::memcmp(frame.data(), tag.data(), tag.size()) == 0;
}

sha256_digest proof(std::string_view token, std::string_view label,
                    std::span<const uint8_t> nonce0,
                    std::span<const uint8_t> nonce1) {
  return hmac_sha256(token, {bytes_of(label), nonce0, nonce1});
}

int millis_left(clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
    deadline - clock::now());
  return static_cast<int>(std::clamp<int64_t>(left.count(), 0, 1 << 30));
}

// Waits for `events` on fd until the deadline; false when it passed.
bool ready(int fd, short events, clock::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    auto n = ::poll(&p, 1, millis_left(deadline));
    if (n > 0)
      return true;
    if (n == 0 || errno != EINTR)
      return false;
  }
}

enum class io_result { done, closed, late, failed };

// Exactly out.size() bytes, never more: what follows belongs to CAF.
io_result read_exactly(int fd, std::span<uint8_t> out,
                       clock::time_point deadline) {
  size_t got = 0;
  while (got < out.size()) {
    auto n = ::recv(fd, out.data() + got, out.size() - got, 0);
    if (n > 0) {
      got += static_cast<size_t>(n);
      continue;
    }
    if (n == 0)
      return io_result::closed;
    if (errno == EINTR)
      continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK)
      return errno == ECONNRESET ? io_result::closed : io_result::failed;
    if (!ready(fd, POLLIN, deadline))
      return io_result::late;
  }
  return io_result::done;
}

io_result write_all(int fd, std::span<const uint8_t> data,
                    clock::time_point deadline) {
  size_t sent = 0;
  while (sent < data.size()) {
    auto n = ::send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
      return errno == EPIPE || errno == ECONNRESET ? io_result::closed
                                                   : io_result::failed;
    if (!ready(fd, POLLOUT, deadline))
      return io_result::late;
  }
  return io_result::done;
}

// A non-blocking connect to one of host's addresses before the deadline.
int connect_before(const std::string& host, uint16_t port,
                   clock::time_point deadline, std::string& why) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  auto port_text = std::to_string(port);
  if (int rc = ::getaddrinfo(host.c_str(), port_text.c_str(), &hints, &found);
      rc != 0) {
    why = std::string{"cannot resolve the host: "} + ::gai_strerror(rc);
    return -1;
  }
  int fd = -1;
  why = "nothing listens there";
  for (auto* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
                  0);
    if (fd < 0) {
      why = std::string{"socket: "} + std::strerror(errno);
      continue;
    }
    int rc = ::connect(fd, a->ai_addr, a->ai_addrlen);
    int err = rc == 0 ? 0 : errno;
    if (err == EINPROGRESS) {
      if (!ready(fd, POLLOUT, deadline)) {
        err = ETIMEDOUT;
      } else {
        socklen_t len = sizeof(err);
        ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
      }
    }
    if (err != 0) {
      why = std::strerror(err);
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(found);
  return fd;
}

} // namespace

gate_nonce random_gate_nonce() {
  gate_nonce out;
  size_t got = 0;
  while (got < out.size()) {
    auto n = ::getrandom(out.data() + got, out.size() - got, 0);
    if (n > 0) {
      got += static_cast<size_t>(n);
    } else if (n < 0 && errno != EINTR) {
      // No getrandom: random_device reads the same kernel source.
      std::random_device dev;
      for (; got < out.size(); ++got)
        out[got] = static_cast<uint8_t>(dev());
    }
  }
  return out;
}

std::array<uint8_t, gate_hello_bytes> gate_hello(const gate_nonce& mine) {
  std::array<uint8_t, gate_hello_bytes> out{};
  std::memcpy(out.data(), hello_tag.data(), hello_tag.size());
  std::copy(mine.begin(), mine.end(), out.begin() + hello_tag.size());
  return out;
}

gate_verdict
check_gate_answer(std::string_view token, const gate_nonce& mine,
                  std::span<const uint8_t, gate_answer_bytes> answer) {
  gate_verdict out;
  auto theirs = answer.subspan(hello_tag.size(), gate_nonce_bytes);
  auto claimed = answer.subspan(hello_tag.size() + gate_nonce_bytes);
  out.foreign = !starts_with(answer, hello_tag);
  out.accepted = !out.foreign
                 && equal_in_constant_time(
                   proof(token, peer_label, mine, theirs), claimed);
  auto tag = out.accepted ? accepted_tag : refused_tag;
  std::memcpy(out.frame.data(), tag.data(), tag.size());
  if (out.accepted) {
    auto back = proof(token, rank0_label, mine, theirs);
    std::copy(back.begin(), back.end(), out.frame.begin() + tag.size());
  }
  return out;
}

void tune_control_socket(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  ::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
  ::fcntl(fd, F_SETFD, FD_CLOEXEC);
}

gate_attempt prove_to_gate(const std::string& host, uint16_t port,
                           std::string_view token,
                           clock::time_point deadline) {
  gate_attempt out;
  auto fail = [&](errc code, const std::string& why) {
    out.error = make_error(code, why);
    return out;
  };
  std::string why;
  int fd = connect_before(host, port, deadline, why);
  if (fd < 0) {
    out.retry = true;
    return fail(errc::timeout, why);
  }
  struct closer {
    int& fd;
    ~closer() {
      if (fd >= 0)
        ::close(fd);
    }
  } close_unless_kept{fd};
  auto lost = [&](io_result r, const char* stage) {
    out.stalled = r == io_result::late;
    out.retry = r == io_result::closed;
    return fail(errc::timeout,
                r == io_result::late
                  ? std::string{"a program there accepted the connection "
                                "but never completed varsync's handshake ("}
                      + stage + ")"
                : r == io_result::closed
                  ? std::string{"process 0 closed the connection "} + stage
                      + " (it is full, or shutting down)"
                  : std::string{"the connection failed "} + stage + ": "
                      + std::strerror(errno));
  };
  std::array<uint8_t, gate_hello_bytes> hello;
  if (auto r = read_exactly(fd, hello, deadline); r != io_result::done)
    return lost(r, "before its hello");
  if (!starts_with(hello, hello_tag))
    return fail(errc::invalid_argument,
                "the program there does not speak varsync's rendezvous "
                "protocol (another program, or a varsync older than the "
                "cluster token)");
  auto nonce0 = std::span<const uint8_t>{hello}.subspan(hello_tag.size());
  auto nonce1 = random_gate_nonce();
  std::array<uint8_t, gate_answer_bytes> answer{};
  std::memcpy(answer.data(), hello_tag.data(), hello_tag.size());
  std::copy(nonce1.begin(), nonce1.end(), answer.begin() + hello_tag.size());
  auto mine = proof(token, peer_label, nonce0, nonce1);
  std::copy(mine.begin(), mine.end(),
            answer.begin() + hello_tag.size() + gate_nonce_bytes);
  if (auto r = write_all(fd, answer, deadline); r != io_result::done)
    return lost(r, "before it took this process's answer");
  std::array<uint8_t, gate_verdict_bytes> verdict;
  if (auto r = read_exactly(fd, verdict, deadline); r != io_result::done)
    return lost(r, "before its verdict");
  if (starts_with(verdict, refused_tag))
    return fail(errc::invalid_argument,
                "process 0 refused this process: its cluster token "
                "(VARSYNC_CLUSTER_TOKEN, cluster_spec::cluster_token) is not "
                "process 0's");
  auto expected = proof(token, rank0_label, nonce0, nonce1);
  if (!starts_with(verdict, accepted_tag)
      || !equal_in_constant_time(
        expected, std::span<const uint8_t>{verdict}.subspan(8)))
    return fail(errc::invalid_argument,
                "the process there does not know the cluster token: it is "
                "not this cluster's process 0");
  tune_control_socket(fd);
  out.fd = fd;
  fd = -1; // kept
  return out;
}

} // namespace varsync
