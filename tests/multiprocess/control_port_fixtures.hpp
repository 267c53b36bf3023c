#pragma once
// The rendezvous port as process 0 serves it (a store behind the
// rendezvous gate, actors/cluster/rendezvous_gate.hpp) and as another process
// reaches it (the handshake, then CAF over the same connection), each in an
// actor system of its own, on loopback; and raw sockets for peers that are
// not varsync.

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/io/middleman.hpp>
#include <caf/send.hpp>
#include <spdlog/sinks/base_sink.h>

#include "actors/cluster/control_connections.hpp"
#include "actors/cluster/peer_handshake.hpp"
#include "actors/cluster/rendezvous_gate.hpp"
#include "actors/cluster/rendezvous_store_actor.hpp"
#include "core/logging.hpp"
#include "varsync/config.hpp"

namespace varsync::testing {

struct io_config : caf::actor_system_config {
  io_config() {
    register_types(*this);
    load<caf::io::middleman>();
    set("scheduler.max-threads", 2);
    set("logger.verbosity", caf::atom("quiet"));
  }
};

// A store served on a loopback port by a gate of its own.
struct hosted_store {
  io_config cfg;
  caf::actor_system host{cfg};
  rendezvous_store_actor store = spawn_rendezvous_store(host);
  std::shared_ptr<control_connections> connections;
  caf::expected<std::unique_ptr<rendezvous_gate>> gate{caf::error{}};
  uint16_t port = 0;

  explicit hosted_store(std::string token = {},
                        std::chrono::milliseconds handshake
                        = std::chrono::milliseconds{5000},
                        size_t max_connections = 8)
    : connections(std::make_shared<control_connections>(host, handshake)) {
    rendezvous_gate_options opts;
    opts.token = std::move(token);
    opts.handshake_timeout = handshake;
    opts.max_connections = max_connections;
    gate = rendezvous_gate::open(opts, connections,
                                 caf::actor_cast<caf::strong_actor_ptr>(store),
                                 host.message_types<rendezvous_store_actor>());
    if (gate)
      port = (*gate)->port();
  }
  ~hosted_store() {
    if (gate)
      (*gate)->stop();
    connections->release();
    caf::anon_send_exit(store, caf::exit_reason::user_shutdown);
  }
};

// Another process's view of the store: an actor system of its own that
// proved `token` at `port` and reached the store over that connection.
struct store_peer {
  io_config cfg;
  caf::actor_system sys{cfg};
  std::shared_ptr<control_connections> connections
    = std::make_shared<control_connections>(sys,
                                            std::chrono::milliseconds{5000});
  caf::expected<rendezvous_store_actor> remote{caf::error{}};
  explicit store_peer(uint16_t port, const std::string& token = {}) {
    auto attempt = prove_to_gate("127.0.0.1", port, token,
                                 std::chrono::steady_clock::now()
                                   + std::chrono::seconds{10});
    if (attempt.fd < 0) {
      remote = attempt.error;
      return;
    }
    auto r = connections->open(attempt.fd, port, std::chrono::seconds{10});
    if (!r)
      remote = r.error();
    else
      remote = caf::actor_cast<rendezvous_store_actor>(std::move(r->actor));
  }
  ~store_peer() { connections->release(); }
};

// A connected loopback socket (-1 if nothing listens).
inline int connect_loopback(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Reads exactly n bytes within `limit`; fewer when the peer closed first
// or the time ran out.
inline std::vector<unsigned char> read_some(int fd, size_t n,
                                            std::chrono::milliseconds limit) {
  std::vector<unsigned char> out;
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (out.size() < n) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
    pollfd p{fd, POLLIN, 0};
    if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0)
      break;
    unsigned char buf[512];
    auto got = ::recv(fd, buf, std::min(sizeof(buf), n - out.size()), 0);
    if (got <= 0)
      break;
    out.insert(out.end(), buf, buf + got);
  }
  return out;
}

// True when the peer closes `fd` within `limit` (whatever it sends first).
inline bool closed_within(int fd, std::chrono::milliseconds limit) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
    pollfd p{fd, POLLIN, 0};
    if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0)
      return false;
    unsigned char buf[4096];
    auto got = ::recv(fd, buf, sizeof(buf), 0);
    if (got == 0 || (got < 0 && errno == ECONNRESET))
      return true;
    if (got < 0)
      return false;
  }
}

// What varsync logs while it lives (warnings and up, the default level).
// Declare it before whatever logs, so that it outlives it: the logger's
// sinks are not guarded against threads that log meanwhile.
class captured_log {
public:
  captured_log() : sink_(std::make_shared<sink>()) {
    log()->sinks().push_back(sink_);
  }
  ~captured_log() { std::erase(log()->sinks(), sink_); }
  std::string text() {
    std::lock_guard<std::mutex> lock{sink_->text_mtx};
    return sink_->text;
  }

private:
  struct sink final : spdlog::sinks::base_sink<std::mutex> {
    std::mutex text_mtx;
    std::string text;
    void sink_it_(const spdlog::details::log_msg& msg) override {
      spdlog::memory_buf_t buf;
      formatter_->format(msg, buf);
      std::lock_guard<std::mutex> lock{text_mtx};
      text.append(buf.data(), buf.size());
    }
    void flush_() override {}
  };
  std::shared_ptr<sink> sink_;
};

} // namespace varsync::testing
