#pragma once
// SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104), for the rendezvous
// gate's challenge and response (actors/cluster/peer_handshake.hpp): small
// inputs, no dependency on a crypto library.

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string_view>

namespace varsync {

using sha256_digest = std::array<uint8_t, 32>;

class sha256 {
public:
  sha256();
  void update(std::span<const uint8_t> bytes);
  sha256_digest finish();

private:
  void block(const uint8_t* p);

  std::array<uint32_t, 8> state_;
  std::array<uint8_t, 64> buffer_{};
  size_t buffered_ = 0;
  uint64_t total_ = 0;
};

/// HMAC-SHA256 of the concatenation of `parts` under `key`.
sha256_digest
hmac_sha256(std::string_view key,
            std::initializer_list<std::span<const uint8_t>> parts);

/// Compares in time that depends on the length only (a proof must not leak
/// how many of its leading bytes were right).
bool equal_in_constant_time(std::span<const uint8_t> a,
                            std::span<const uint8_t> b);

} // namespace varsync
