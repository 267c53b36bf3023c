// The rendezvous handshake's pieces (actors/cluster/peer_handshake.hpp): the
// HMAC it proves the token with, and process 0's check of an answer.

#include <catch2/catch.hpp>

#include <cstring>
#include <string>

#include "actors/cluster/hmac_sha256.hpp"
#include "actors/cluster/peer_handshake.hpp"

using namespace varsync;

namespace {

std::span<const uint8_t> text_bytes(std::string_view s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

std::string hex(const sha256_digest& d) {
  static const char digits[] = "0123456789abcdef";
  std::string out;
  for (auto b : d) {
    out += digits[b >> 4];
    out += digits[b & 15];
  }
  return out;
}

// A peer's answer to `hello`, made as prove_to_gate makes it.
std::array<uint8_t, gate_answer_bytes>
answer_to(const std::array<uint8_t, gate_hello_bytes>& hello,
          std::string_view token, const gate_nonce& mine) {
  std::array<uint8_t, gate_answer_bytes> out{};
  std::memcpy(out.data(), hello.data(), 8);
  std::copy(mine.begin(), mine.end(), out.begin() + 8);
  auto proof = hmac_sha256(token, {text_bytes("varsync gate: peer"),
                                   std::span{hello}.subspan(8), mine});
  std::copy(proof.begin(), proof.end(), out.begin() + 8 + gate_nonce_bytes);
  return out;
}

} // namespace

TEST_CASE("rendezvous handshake: SHA-256 and HMAC-SHA256 match FIPS 180 "
          "and RFC 4231") {
  sha256 empty;
  CHECK(hex(empty.finish())
        == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  sha256 two_blocks;
  two_blocks.update(
    text_bytes("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"));
  CHECK(hex(two_blocks.finish())
        == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  CHECK(hex(hmac_sha256(std::string(20, '\x0b'), {text_bytes("Hi There")}))
        == "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  CHECK(hex(hmac_sha256("Jefe", {text_bytes("what do ya want "),
                                 text_bytes("for nothing?")}))
        == "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  // A key longer than the block is hashed first.
  CHECK(hex(hmac_sha256(std::string(131, '\xaa'),
                        {text_bytes("Test Using Larger Than Block-Size Key - "
                                    "Hash Key First")}))
        == "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
}

TEST_CASE("rendezvous handshake: process 0 accepts the answer made with its "
          "token only, and proves the token back") {
  const std::string token = "the-cluster-token-0123";
  auto nonce0 = random_gate_nonce();
  auto nonce1 = random_gate_nonce();
  CHECK(nonce0 != nonce1);
  auto hello = gate_hello(nonce0);
  auto right = check_gate_answer(token, nonce0, answer_to(hello, token, nonce1));
  CHECK(right.accepted);
  CHECK(std::string(right.frame.begin(), right.frame.begin() + 8)
        == "VSGATEOK");
  // Process 0's proof is not the peer's (no reflection).
  auto peer_proof = answer_to(hello, token, nonce1);
  CHECK(!std::equal(right.frame.begin() + 8, right.frame.end(),
                    peer_proof.begin() + 8 + gate_nonce_bytes));
  auto wrong = check_gate_answer(
    token, nonce0, answer_to(hello, "another-token-0123", nonce1));
  CHECK(!wrong.accepted);
  CHECK(!wrong.foreign);
  CHECK(std::string(wrong.frame.begin(), wrong.frame.begin() + 8)
        == "VSGATENO");
  // An answer to another hello (a replay) is refused.
  auto other = random_gate_nonce();
  CHECK(!check_gate_answer(token, other, answer_to(hello, token, nonce1))
           .accepted);
  // Bytes of another protocol.
  std::array<uint8_t, gate_answer_bytes> junk{};
  junk.fill(0x42);
  auto foreign = check_gate_answer(token, nonce0, junk);
  CHECK(!foreign.accepted);
  CHECK(foreign.foreign);
  // Without a token the key is empty: any peer that speaks the protocol.
  CHECK(check_gate_answer("", nonce0, answer_to(hello, "", nonce1)).accepted);
}
