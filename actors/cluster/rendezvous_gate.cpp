#include "actors/cluster/rendezvous_gate.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <thread>
#include <vector>

#include "actors/cluster/control_connections.hpp"
#include "actors/cluster/peer_handshake.hpp"
#include "core/logging.hpp"
#include "varsync/error.hpp"

namespace varsync {

namespace {

using clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

// How often connections handed to CAF are checked for a handshake that
// never came (control_connections::reap).
constexpr auto reap_interval = 250ms;
// Out of file descriptors: how long the listener rests.
constexpr auto out_of_descriptors_pause = 100ms;

std::string address_text(const sockaddr_storage& addr) {
  char host[INET6_ADDRSTRLEN] = "?";
  uint16_t port = 0;
  if (addr.ss_family == AF_INET) {
    auto& a = reinterpret_cast<const sockaddr_in&>(addr);
    ::inet_ntop(AF_INET, &a.sin_addr, host, sizeof(host));
    port = ntohs(a.sin_port);
  } else if (addr.ss_family == AF_INET6) {
    auto& a = reinterpret_cast<const sockaddr_in6&>(addr);
    ::inet_ntop(AF_INET6, &a.sin6_addr, host, sizeof(host));
    port = ntohs(a.sin6_port);
    return std::string{"["} + host + "]:" + std::to_string(port);
  }
  return std::string{host} + ":" + std::to_string(port);
}

bool is_loopback(const sockaddr_storage& addr) {
  if (addr.ss_family == AF_INET)
    return (ntohl(reinterpret_cast<const sockaddr_in&>(addr).sin_addr.s_addr)
            >> 24)
           == 127;
  if (addr.ss_family == AF_INET6)
    return IN6_IS_ADDR_LOOPBACK(
      &reinterpret_cast<const sockaddr_in6&>(addr).sin6_addr);
  return false;
}

// Warnings about refused peers, one a second at most; the next one counts
// what was held back.
class refusal_log {
public:
  explicit refusal_log(std::string where) : where_(std::move(where)) {}

  void note(const std::string& what) {
    size_t held_back = 0;
    if (!throttle_.admit(held_back))
      return;
    if (held_back > 0)
      log()->warn("rendezvous at {}: {} ({} more refused or closed in the "
                  "second before)",
                  where_, what, held_back);
    else
      log()->warn("rendezvous at {}: {}", where_, what);
  }

private:
  std::string where_;
  log_throttle throttle_;
};

// A connection in its handshake.
struct peer {
  int fd = -1;
  gate_nonce nonce;
  std::array<uint8_t, gate_answer_bytes> answer{};
  size_t got = 0;
  clock::time_point deadline;
  std::string from;
};

int listen_on(const std::string& host, uint16_t port, std::string& why) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  auto port_text = std::to_string(port);
  if (int rc = ::getaddrinfo(host.c_str(), port_text.c_str(), &hints, &found);
      rc != 0) {
    why = ::gai_strerror(rc);
    return -1;
  }
  int fd = -1;
  for (auto* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
                  0);
    if (fd < 0) {
      why = std::strerror(errno);
      continue;
    }
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(fd, a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd, 128) != 0) {
      why = std::strerror(errno);
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(found);
  return fd;
}

} // namespace

struct rendezvous_gate::state {
  rendezvous_gate_options opts;
  std::shared_ptr<control_connections> connections;
  caf::strong_actor_ptr published;
  std::set<std::string> interface;
  int listener = -1;
  int wake = -1;
  // Given up to shed a connection when the process is out of descriptors.
  int spare = -1;
  uint16_t port = 0;
  bool loopback = false;
  std::thread thread;
  std::atomic<bool> stopping{false};
  std::vector<peer> peers;
  clock::time_point paused_until{};
  refusal_log refusals;

  explicit state(std::string where) : refusals(std::move(where)) {}

  void run();
  void accept_waiting();
  void shed_one();
  void admit(int fd, std::string from);
  bool read_answer(peer& p);
  void decide(peer& p);
  void expire(clock::time_point now);
};

void rendezvous_gate::state::run() {
  auto next_reap = clock::now() + reap_interval;
  std::vector<pollfd> fds;
  while (!stopping.load()) {
    auto now = clock::now();
    expire(now);
    const bool listening = now >= paused_until;
    auto wake_at = next_reap;
    fds.clear();
    fds.push_back({wake, POLLIN, 0});
    fds.push_back({listening ? listener : -1, POLLIN, 0});
    for (auto& p : peers) {
      fds.push_back({p.fd, POLLIN, 0});
      wake_at = std::min(wake_at, p.deadline);
    }
    if (!listening)
      wake_at = std::min(wake_at, paused_until);
    auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(
      wake_at - now);
    auto n = ::poll(fds.data(), fds.size(),
                    static_cast<int>(std::max<int64_t>(wait.count(), 0) + 1));
    if (n < 0 && errno != EINTR)
      std::this_thread::sleep_for(10ms); // never a busy loop
    if (n > 0 && (fds[0].revents & POLLIN) != 0)
      break; // stop()
    if (n > 0) {
      // Backwards: erasing a peer leaves the indices below it in place.
      for (size_t i = peers.size(); i-- > 0;)
        if (fds[2 + i].revents != 0 && read_answer(peers[i]))
          peers.erase(peers.begin() + static_cast<ptrdiff_t>(i));
      if ((fds[1].revents & POLLIN) != 0)
        accept_waiting();
    }
    if (clock::now() >= next_reap) {
      connections->reap();
      next_reap = clock::now() + reap_interval;
    }
  }
}

void rendezvous_gate::state::accept_waiting() {
  // A burst at most, so that the peers in their handshake are served too.
  for (size_t i = 0; i < rendezvous_gate_limits::handshaking; ++i) {
    sockaddr_storage addr{};
    socklen_t len = sizeof(addr);
    int fd = ::accept4(listener, reinterpret_cast<sockaddr*>(&addr), &len,
                       SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) {
      admit(fd, address_text(addr));
      continue;
    }
    if (errno == EINTR || errno == ECONNABORTED)
      continue;
    if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS
        || errno == ENOMEM)
      shed_one();
    return;
  }
}

// Out of descriptors, the waiting connection keeps the listener readable:
// polling it again at once would spin. Close that connection with the
// spare descriptor, and rest the listener a moment.
void rendezvous_gate::state::shed_one() {
  if (spare >= 0) {
    ::close(spare);
    spare = -1;
    int fd = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd >= 0)
      ::close(fd);
    spare = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  }
  paused_until = clock::now() + out_of_descriptors_pause;
  refusals.note("this process is out of file descriptors: a connection was "
                "closed unanswered");
}

void rendezvous_gate::state::admit(int fd, std::string from) {
  if (peers.size() >= rendezvous_gate_limits::handshaking) {
    ::close(fd);
    refusals.note("refused " + from + ": "
                  + std::to_string(rendezvous_gate_limits::handshaking)
                  + " connections are in their handshake already");
    return;
  }
  if (connections->open_count() >= opts.max_connections) {
    ::close(fd);
    refusals.note("refused " + from + ": the control plane holds "
                  + std::to_string(opts.max_connections)
                  + " connections already");
    return;
  }
  peer p;
  p.fd = fd;
  p.nonce = random_gate_nonce();
  p.deadline = clock::now() + opts.handshake_timeout;
  p.from = std::move(from);
  auto hello = gate_hello(p.nonce);
  // A fresh socket's buffer takes the 40 bytes at once.
  if (::send(fd, hello.data(), hello.size(), MSG_NOSIGNAL | MSG_DONTWAIT)
      != static_cast<ssize_t>(hello.size())) {
    ::close(fd);
    return;
  }
  peers.push_back(std::move(p));
}

// True when the peer leaves the handshake (admitted or closed).
bool rendezvous_gate::state::read_answer(peer& p) {
  // Never more than the answer: what follows it is CAF's.
  auto n = ::recv(p.fd, p.answer.data() + p.got, p.answer.size() - p.got, 0);
  if (n > 0) {
    p.got += static_cast<size_t>(n);
    if (p.got < p.answer.size())
      return false;
    decide(p);
    return true;
  }
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
    return false;
  log()->debug("rendezvous: {} hung up during the handshake", p.from);
  ::close(p.fd);
  return true;
}

void rendezvous_gate::state::decide(peer& p) {
  auto verdict = check_gate_answer(opts.token, p.nonce, p.answer);
  if (!verdict.accepted) {
    if (!verdict.foreign)
      ::send(p.fd, verdict.frame.data(), verdict.frame.size(),
             MSG_NOSIGNAL | MSG_DONTWAIT);
    ::close(p.fd);
    refusals.note("refused " + p.from
                  + (verdict.foreign
                       ? ": it does not speak varsync's rendezvous handshake"
                       : ": it did not prove the cluster token"));
    return;
  }
  if (connections->open_count() >= opts.max_connections) {
    ::close(p.fd);
    refusals.note("refused " + p.from + ": the control plane holds "
                  + std::to_string(opts.max_connections)
                  + " connections already");
    return;
  }
  if (::send(p.fd, verdict.frame.data(), verdict.frame.size(),
             MSG_NOSIGNAL | MSG_DONTWAIT)
      != static_cast<ssize_t>(verdict.frame.size())) {
    ::close(p.fd);
    return;
  }
  tune_control_socket(p.fd);
  log()->debug("rendezvous: admitted {}", p.from);
  connections->serve(p.fd, port, published, interface);
}

void rendezvous_gate::state::expire(clock::time_point now) {
  for (size_t i = peers.size(); i-- > 0;) {
    if (peers[i].deadline > now)
      continue;
    ::close(peers[i].fd);
    refusals.note("closed " + peers[i].from + ": no handshake within "
                  + std::to_string(opts.handshake_timeout.count()) + " ms");
    peers.erase(peers.begin() + static_cast<ptrdiff_t>(i));
  }
}

caf::expected<std::unique_ptr<rendezvous_gate>>
rendezvous_gate::open(rendezvous_gate_options options,
                      std::shared_ptr<control_connections> connections,
                      caf::strong_actor_ptr published,
                      std::set<std::string> interface) {
  const auto where = options.host + ":" + std::to_string(options.port);
  std::string why;
  int fd = listen_on(options.host, options.port, why);
  if (fd < 0)
    return make_error(errc::invalid_argument,
                      "cannot listen on " + where + ": " + why);
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  auto s = std::make_unique<state>(address_text(addr));
  s->listener = fd;
  s->port = addr.ss_family == AF_INET6
              ? ntohs(reinterpret_cast<sockaddr_in6&>(addr).sin6_port)
              : ntohs(reinterpret_cast<sockaddr_in&>(addr).sin_port);
  s->loopback = is_loopback(addr);
  s->wake = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  s->spare = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (s->wake < 0) {
    ::close(fd);
    return make_error(errc::invalid_argument,
                      "cannot serve " + where + ": eventfd: "
                        + std::strerror(errno));
  }
  s->opts = std::move(options);
  s->connections = std::move(connections);
  s->published = std::move(published);
  s->interface = std::move(interface);
  auto* raw = s.get();
  s->thread = std::thread{[raw] { raw->run(); }};
  return std::unique_ptr<rendezvous_gate>{new rendezvous_gate(std::move(s))};
}

rendezvous_gate::rendezvous_gate(std::unique_ptr<state> s)
  : state_(std::move(s)) {
}

rendezvous_gate::~rendezvous_gate() {
  stop();
}

uint16_t rendezvous_gate::port() const {
  return state_->port;
}

bool rendezvous_gate::loopback() const {
  return state_->loopback;
}

void rendezvous_gate::stop() {
  auto& s = *state_;
  if (s.stopping.exchange(true))
    return;
  uint64_t one = 1;
  [[maybe_unused]] auto n = ::write(s.wake, &one, sizeof(one));
  if (s.thread.joinable())
    s.thread.join();
  for (auto& p : s.peers)
    ::close(p.fd);
  s.peers.clear();
  for (int fd : {s.listener, s.wake, s.spare})
    if (fd >= 0)
      ::close(fd);
  s.listener = s.wake = s.spare = -1;
}

} // namespace varsync
