// What a peer that reached the rendezvous store can make it do
// (actors/cluster/rendezvous_store_actor), seen from another actor system over
// a real connection on loopback (through the rendezvous gate, as every
// process reaches it), and what bytes that are not varsync's handshake do to
// the process that serves it.

#include <catch2/catch.hpp>

#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <caf/scoped_actor.hpp>

#include "control_port_fixtures.hpp"
#include "varsync/error.hpp"

using namespace varsync;
using namespace std::chrono_literals;
using varsync::testing::hosted_store;
using varsync::testing::store_peer;

namespace {

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
  int fd = varsync::testing::connect_loopback(port);
  if (fd < 0)
    return false;
  bool closed = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL)
                  == static_cast<ssize_t>(data.size())
                && varsync::testing::closed_within(fd, 2s);
  ::close(fd);
  return closed;
}

} // namespace

TEST_CASE("control port: a peer cannot replace a key, keep an actor, or make "
          "the store hold more than its bounds") {
  hosted_store hosted;
  auto& host = hosted.host;
  auto& store = hosted.store;
  REQUIRE(hosted.gate);
  {
    store_peer peer{hosted.port};
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

TEST_CASE("control port: bytes that are not varsync's handshake close their "
          "connection and leave the store serving") {
  hosted_store hosted;
  REQUIRE(hosted.gate);
  const int port = hosted.port;
  // Random bytes, an unknown message type, and CAF's own handshake header
  // claiming ~2 GiB of payload (what a CAF peer sends): none of it is the
  // handshake's answer.
  std::vector<unsigned char> junk(256);
  for (size_t i = 0; i < junk.size(); ++i)
    junk[i] = static_cast<unsigned char>((i * 167 + 13) % 251);
  std::vector<unsigned char> unknown(72, 0);
  unknown[0] = 0xEE;
  std::vector<unsigned char> huge(32, 0);
  huge[0] = 0x01; // client handshake
  huge[4] = 0x7F;
  huge[5] = 0xFF;
  huge[6] = 0xFF;
  huge[7] = 0xF0;
  huge.resize(huge.size() + 100, 0x42);
  for (int round = 0; round < 3; ++round) {
    CHECK(send_and_await_close(port, junk));
    CHECK(send_and_await_close(port, unknown));
    CHECK(send_and_await_close(port, huge));
  }
  // A well-behaved peer is served as before.
  store_peer peer{hosted.port};
  auto& remote = peer.remote;
  REQUIRE(remote);
  caf::scoped_actor self{peer.sys};
  CHECK(set_result(self, *remote, store_set_atom::value, std::string{"g/k"},
                   bytes("v"))
        == errc::none);
  CHECK(get_bytes(self, *remote, "g/k") == bytes("v"));
}
