#pragma once
// Device names: "cpu:K" (host memory) and "cuda:K" (GPU K).

#include <string>
#include <string_view>

#include <caf/expected.hpp>

namespace varsync {

enum class device_kind : uint8_t { host, cuda };

struct device_id {
  device_kind kind = device_kind::host;
  int index = 0;

  friend bool operator==(const device_id&, const device_id&) = default;
};

std::string to_string(const device_id& id);

/// Parses "cpu:0", "cuda:1"; fails with invalid_argument otherwise.
caf::expected<device_id> parse_device(std::string_view text);

} // namespace varsync
