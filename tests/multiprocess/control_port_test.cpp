// The rendezvous port is unauthenticated: what a peer can make the store do
// (actors/gloo/rendezvous_store_actor), seen from another actor system over
// a real CAF connection on loopback, and what bytes that are not CAF's
// protocol do to the process that serves it.

#include <catch2/catch.hpp>

#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/io/middleman.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>

#include "actors/gloo/rendezvous_store_actor.hpp"
#include "varsync/config.hpp"
#include "varsync/error.hpp"

using namespace varsync;
using namespace std::chrono_literals;

namespace {

struct io_config : caf::actor_system_config {
  io_config() {
    register_types(*this);
    load<caf::io::middleman>();
    set("scheduler.max-threads", 2);
    set("logger.verbosity", caf::atom("quiet"));
  }
};

// The store's answer to a set: ok, or the error's code.
template <class... Ts>
errc set_result(caf::scoped_actor& self, const rendezvous_store_actor& store,
                Ts&&... xs) {
  errc out = errc::none;
  self->request(store, 5s, std::forward<Ts>(xs)...)
    .receive([](ok_atom) {},
             [&](caf::error& err) {
               out = err.category() == error_category
                       ? static_cast<errc>(err.code())
                       : errc::replica_failed;
             });
  return out;
}

std::vector<char> get_bytes(caf::scoped_actor& self,
                            const rendezvous_store_actor& store,
                            const std::string& key) {
  std::vector<char> out;
  self->request(store, 5s, store_get_atom::value, key)
    .receive([&](std::vector<char>& bytes) { out = std::move(bytes); },
             [](caf::error&) {});
  return out;
}

std::vector<char> bytes(const std::string& s) {
  return {s.begin(), s.end()};
}

// Connects to 127.0.0.1:port, writes `data`, reads until the peer closes
// (or 2 s pass); true if the peer closed the connection.
bool send_and_await_close(int port, const std::vector<unsigned char>& data) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0)
    return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  timeval tv{2, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  bool closed = false;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0
      && ::send(fd, data.data(), data.size(), MSG_NOSIGNAL)
           == static_cast<ssize_t>(data.size())) {
    char buf[512];
    for (;;) {
      auto n = ::recv(fd, buf, sizeof(buf), 0);
      if (n == 0) {
        closed = true;
        break;
      }
      if (n < 0)
        break; // timed out (or reset)
    }
  }
  ::close(fd);
  return closed;
}

// A store published on a loopback port of an actor system of its own.
struct hosted_store {
  io_config cfg;
  caf::actor_system host{cfg};
  rendezvous_store_actor store = spawn_rendezvous_store(host);
  caf::expected<uint16_t> port = host.middleman().publish(store, 0,
                                                          "127.0.0.1");
  ~hosted_store() {
    caf::anon_send_exit(store, caf::exit_reason::user_shutdown);
  }
};

// Another process's view of the store: an actor system of its own
// connected to `port` over CAF's network layer.
struct store_peer {
  io_config cfg;
  caf::actor_system sys{cfg};
  caf::expected<rendezvous_store_actor> remote;
  explicit store_peer(uint16_t port)
    : remote(sys.middleman().remote_actor<rendezvous_store_actor>("127.0.0.1",
                                                                  port)) {
  }
};

} // namespace

TEST_CASE("control port: a peer cannot replace a key, keep an actor, or make "
          "the store hold more than its bounds") {
  hosted_store hosted;
  auto& host = hosted.host;
  auto& store = hosted.store;
  auto& port = hosted.port;
  REQUIRE(port);
  {
    store_peer peer{*port};
    auto& remote = peer.remote;
    REQUIRE(remote);
    caf::scoped_actor self{peer.sys};
    // The host keeps what a rank published.
    {
      caf::scoped_actor local{host};
      CHECK(set_result(local, store, store_set_atom::value,
                       std::string{"g/sequencer-port"}, bytes("4711"))
            == errc::none);
      auto own = caf::actor_cast<caf::strong_actor_ptr>(store);
      CHECK(set_result(local, store, store_set_actor_atom::value,
                       std::string{"g/sequencer"}, own)
            == errc::none);
    }
    // Setting a key again: the same bytes are a no-op, others refused.
    CHECK(set_result(self, *remote, store_set_atom::value,
                     std::string{"g/sequencer-port"}, bytes("4711"))
          == errc::none);
    CHECK(set_result(self, *remote, store_set_atom::value,
                     std::string{"g/sequencer-port"}, bytes("6666"))
          == errc::invalid_argument);
    CHECK(get_bytes(self, *remote, "g/sequencer-port") == bytes("4711"));
    // No actor of the peer's own, under a new name or the taken one.
    auto mine = caf::actor_cast<caf::strong_actor_ptr>(self);
    CHECK(set_result(self, *remote, store_set_actor_atom::value,
                     std::string{"g/other"}, mine)
          == errc::invalid_argument);
    CHECK(set_result(self, *remote, store_set_actor_atom::value,
                     std::string{"g/sequencer"}, mine)
          == errc::invalid_argument);
    // Keys and values beyond the bounds.
    CHECK(set_result(self, *remote, store_set_atom::value,
                     std::string(rendezvous_store_limits::key_bytes + 1, 'k'),
                     bytes("x"))
          == errc::invalid_argument);
    CHECK(set_result(self, *remote, store_set_atom::value, std::string{},
                     bytes("x"))
          == errc::invalid_argument);
    CHECK(set_result(self, *remote, store_set_atom::value,
                     std::string{"g/big"},
                     std::vector<char>(rendezvous_store_limits::value_bytes + 1,
                                       'v'))
          == errc::invalid_argument);
    // The total: 1 MiB values until the store is full.
    const auto fits = rendezvous_store_limits::total_bytes
                      / rendezvous_store_limits::value_bytes;
    errc last = errc::none;
    size_t stored = 0;
    for (size_t i = 0; i <= fits && last == errc::none; ++i) {
      last = set_result(self, *remote, store_set_atom::value,
                        "g/fill" + std::to_string(i),
                        std::vector<char>(rendezvous_store_limits::value_bytes
                                            - 16,
                                          'v'));
      if (last == errc::none)
        ++stored;
    }
    CHECK(last == errc::overloaded);
    CHECK(stored > 0);
    CHECK(stored <= fits);
    // What was there is still served.
    CHECK(get_bytes(self, *remote, "g/sequencer-port") == bytes("4711"));
  }
}

TEST_CASE("control port: bytes that are not CAF's protocol close their "
          "connection and leave the store serving") {
  hosted_store hosted;
  auto& port = hosted.port;
  REQUIRE(port);
  // Random bytes, an unknown message type, and a handshake header that
  // claims ~2 GiB of payload followed by a few bytes and a hang-up.
  std::vector<unsigned char> junk(256);
  for (size_t i = 0; i < junk.size(); ++i)
    junk[i] = static_cast<unsigned char>((i * 167 + 13) % 251);
  std::vector<unsigned char> unknown(64, 0);
  unknown[0] = 0xEE;
  std::vector<unsigned char> huge(32, 0);
  huge[0] = 0x01; // client handshake
  huge[4] = 0x7F;
  huge[5] = 0xFF;
  huge[6] = 0xFF;
  huge[7] = 0xF0;
  for (int round = 0; round < 3; ++round) {
    CHECK(send_and_await_close(static_cast<int>(*port), junk));
    CHECK(send_and_await_close(static_cast<int>(*port), unknown));
  }
  {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(fd >= 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(*port));
    REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr))
            == 0);
    huge.resize(huge.size() + 100, 0x42);
    CHECK(::send(fd, huge.data(), huge.size(), MSG_NOSIGNAL)
          == static_cast<ssize_t>(huge.size()));
    ::close(fd);
  }
  // A well-behaved peer is served as before.
  store_peer peer{*port};
  auto& remote = peer.remote;
  REQUIRE(remote);
  caf::scoped_actor self{peer.sys};
  CHECK(set_result(self, *remote, store_set_atom::value, std::string{"g/k"},
                   bytes("v"))
        == errc::none);
  CHECK(get_bytes(self, *remote, "g/k") == bytes("v"));
}
