// The rendezvous gate (actors/cluster/rendezvous_gate.hpp): who may reach the
// store, and what a peer that is silent, lies about a message's size or
// does not know the cluster token costs process 0. Real peers on loopback:
// raw sockets, a CAF actor system, a varsync process with another token.

#include <catch2/catch.hpp>

#include <chrono>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <caf/scoped_actor.hpp>

#include "control_port_fixtures.hpp"
#include "varsync/error.hpp"

using namespace varsync;
using namespace varsync::testing;
using namespace std::chrono_literals;

namespace {

const std::string token = "0123456789abcdef-the-cluster-token";

bool store_answers(uint16_t port, const std::string& with_token) {
  store_peer peer{port, with_token};
  if (!peer.remote)
    return false;
  caf::scoped_actor self{peer.sys};
  bool ok = false;
  self->request(*peer.remote, 5s, store_set_atom::value, std::string{"g/k"},
                std::vector<char>{'v'})
    .receive([&](ok_atom) { ok = true; }, [](caf::error&) {});
  return ok;
}

// CAF's handshake header as a peer would send it after the gate admitted
// it: a client handshake claiming `claim` bytes of payload.
std::vector<unsigned char> claiming_header(uint32_t claim) {
  std::vector<unsigned char> h(32, 0);
  h[0] = 0x01;
  h[4] = static_cast<unsigned char>(claim >> 24);
  h[5] = static_cast<unsigned char>(claim >> 16);
  h[6] = static_cast<unsigned char>(claim >> 8);
  h[7] = static_cast<unsigned char>(claim);
  return h;
}

long resident_kib() {
  std::ifstream in{"/proc/self/status"};
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmRSS:", 0) == 0)
      return std::stol(line.substr(6));
  return -1;
}

} // namespace

TEST_CASE("rendezvous gate: a peer that does not prove the cluster token is "
          "refused before it reaches the store, and process 0 logs it (P12)") {
  captured_log logged;
  hosted_store hosted{token};
  REQUIRE(hosted.gate);
  // A varsync peer with another token: refused, told so.
  {
    auto attempt = prove_to_gate("127.0.0.1", hosted.port,
                                 "another-token-of-16-bytes",
                                 std::chrono::steady_clock::now() + 10s);
    CHECK(attempt.fd < 0);
    CHECK(has_code(attempt.error, errc::invalid_argument));
    CHECK(message_of(attempt.error).find("refused this process")
          != std::string::npos);
    // And without one.
    CHECK(!store_answers(hosted.port, ""));
  }
  // A raw peer that answers the hello with a made-up proof.
  {
    int fd = connect_loopback(hosted.port);
    REQUIRE(fd >= 0);
    auto hello = read_some(fd, gate_hello_bytes, 5s);
    REQUIRE(hello.size() == gate_hello_bytes);
    std::vector<unsigned char> answer(gate_answer_bytes, 0x5a);
    std::memcpy(answer.data(), hello.data(), 8); // the right tag
    REQUIRE(::send(fd, answer.data(), answer.size(), MSG_NOSIGNAL)
            == static_cast<ssize_t>(answer.size()));
    auto verdict = read_some(fd, gate_verdict_bytes, 5s);
    CHECK(std::string(verdict.begin(), verdict.begin() + 8) == "VSGATENO");
    CHECK(closed_within(fd, 5s));
    ::close(fd);
  }
  // CAF's own client, as before the gate: it never gets the store.
  {
    io_config cfg;
    caf::actor_system sys{cfg};
    caf::scoped_actor self{sys};
    bool reached = false;
    self
      ->request(sys.middleman().actor_handle(), 10s, caf::connect_atom_v,
                std::string{"127.0.0.1"}, hosted.port)
      .receive([&](caf::node_id&, caf::strong_actor_ptr& ptr,
                   std::set<std::string>&) { reached = ptr != nullptr; },
               [](caf::error&) {});
    CHECK(!reached);
  }
  // Nothing any of them did reached the store; the right token does.
  {
    caf::scoped_actor self{hosted.host};
    bool found = false;
    self->request(hosted.store, 200ms, store_get_atom::value,
                  std::string{"g/k"})
      .receive([&](std::vector<char>&) { found = true; }, [](caf::error&) {});
    CHECK(!found);
  }
  CHECK(store_answers(hosted.port, token));
  auto text = logged.text();
  INFO(text);
  CHECK(text.find("did not prove the cluster token") != std::string::npos);
}

TEST_CASE("rendezvous gate: a message header that claims more than a "
          "control message may have closes its connection before anything "
          "is allocated (P13)") {
  // With and without a token: an admitted peer is bounded too.
  for (auto with : {token, std::string{}}) {
    INFO("token: " << (with.empty() ? "none" : "set"));
    hosted_store hosted{with};
    REQUIRE(hosted.gate);
    const auto before = resident_kib();
    for (uint32_t claim : {control_limits::message_bytes + 1, 256u << 20,
                           1u << 30, 0xFFFFFFF0u}) {
      INFO("claim " << claim);
      auto attempt = prove_to_gate("127.0.0.1", hosted.port, with,
                                   std::chrono::steady_clock::now() + 10s);
      REQUIRE(attempt.fd >= 0);
      // Process 0's CAF speaks first (its handshake); then the lie.
      auto header = claiming_header(claim);
      CHECK(!read_some(attempt.fd, 32, 5s).empty());
      CHECK(::send(attempt.fd, header.data(), header.size(), MSG_NOSIGNAL)
            == static_cast<ssize_t>(header.size()));
      // Closed without waiting for the payload (CAF alone waits for it,
      // its buffer sized to the claim).
      CHECK(closed_within(attempt.fd, 5s));
      ::close(attempt.fd);
    }
    // 1.3 GiB and 4 GiB were claimed: the process holds none of it.
    CHECK(resident_kib() - before < 128 * 1024);
    CHECK(store_answers(hosted.port, with));
  }
}

TEST_CASE("rendezvous gate: silent connections are closed at the handshake "
          "deadline, at most 64 wait at once, and a peer is served after "
          "them (P13)") {
  captured_log logged;
  hosted_store hosted{token, 1500ms};
  REQUIRE(hosted.gate);
  const size_t extra = 16;
  std::vector<int> fds;
  for (size_t i = 0; i < rendezvous_gate_limits::handshaking + extra; ++i) {
    int fd = connect_loopback(hosted.port);
    REQUIRE(fd >= 0);
    fds.push_back(fd);
  }
  // Those beyond the bound are closed at once, unanswered; the others get
  // the hello and wait.
  size_t greeted = 0;
  size_t refused = 0;
  for (int fd : fds) {
    auto hello = read_some(fd, gate_hello_bytes, 1000ms);
    if (hello.size() == gate_hello_bytes)
      ++greeted;
    else if (hello.empty() && closed_within(fd, 100ms))
      ++refused;
  }
  CHECK(greeted == rendezvous_gate_limits::handshaking);
  CHECK(refused == extra);
  // Then every silent one is closed (1.5 s after it was accepted).
  size_t closed = 0;
  for (int fd : fds)
    closed += closed_within(fd, 5s) ? 1 : 0;
  CHECK(closed == fds.size());
  for (int fd : fds)
    ::close(fd);
  CHECK(store_answers(hosted.port, token));
  CHECK(logged.text().find("no handshake within 1500 ms")
        != std::string::npos);
}

TEST_CASE("rendezvous gate: an admitted peer that never completes CAF's "
          "handshake is closed at the handshake deadline (P13)") {
  hosted_store hosted{token, 1500ms};
  REQUIRE(hosted.gate);
  auto attempt = prove_to_gate("127.0.0.1", hosted.port, token,
                               std::chrono::steady_clock::now() + 10s);
  REQUIRE(attempt.fd >= 0);
  // Reads process 0's CAF handshake and says nothing.
  CHECK(closed_within(attempt.fd, 10s));
  ::close(attempt.fd);
  CHECK(store_answers(hosted.port, token));
}

TEST_CASE("rendezvous gate: the control plane holds a bounded number of "
          "connections (P13)") {
  hosted_store hosted{token, 5000ms, 2};
  REQUIRE(hosted.gate);
  store_peer first{hosted.port, token};
  store_peer second{hosted.port, token};
  REQUIRE(first.remote);
  REQUIRE(second.remote);
  // A third admitted peer would make three: closed before its verdict.
  auto attempt = prove_to_gate("127.0.0.1", hosted.port, token,
                               std::chrono::steady_clock::now() + 5s);
  CHECK(attempt.fd < 0);
  CHECK(attempt.retry);
}
