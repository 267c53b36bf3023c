// Fuzzes varsync::parse_device (varsync/device_id.hpp), which reads the
// device strings of strategy_options ("cpu:0", "cuda:1").
//
// Properties: a string is either rejected with invalid_argument or accepted
// as a device whose canonical name parses back to the same device; accepted
// indices are 0..9999.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "varsync/error.hpp"
#include "varsync/device_id.hpp"
#include "fuzz_check.hpp"

using namespace varsync;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text{reinterpret_cast<const char*>(data), size};
  auto id = parse_device(text);
  if (!id) {
    FUZZ_CHECK(has_code(id.error(), errc::invalid_argument),
               "unexpected error code");
    FUZZ_CHECK(!message_of(id.error()).empty(), "empty error message");
    return 0;
  }
  FUZZ_CHECK(id->kind == device_kind::host || id->kind == device_kind::cuda,
             "invalid device kind");
  FUZZ_CHECK(id->index >= 0 && id->index <= 9999, "index out of range");
  auto name = to_string(*id);
  auto again = parse_device(name);
  FUZZ_CHECK(again && *again == *id, "to_string does not round-trip");
  // The accepted text names the same device as its canonical form, up to
  // leading zeros of the index.
  auto colon = text.find(':');
  FUZZ_CHECK(colon != std::string_view::npos
               && text.substr(0, colon) == name.substr(0, name.find(':')),
             "accepted a different kind name");
  return 0;
}
