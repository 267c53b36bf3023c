// Fuzzes the enum parsers that read configuration and files:
// parse_synchronization / parse_aggregation (from text and from TensorFlow's
// integer values), parse_reduce_op (varsync/synchronization.hpp) and
// parse_dtype (varsync/dtype.hpp).
//
// Input layout: byte 0 selects the parser, then an 8-byte integer and the
// variable name are taken from the front and the rest is the text to parse
// (FuzzedDataProvider). Properties checked: a parse either succeeds with a
// value whose name parses back to the same value, or fails with the
// documented error code and a non-empty message naming the variable.

#include <cctype>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <fuzzer/FuzzedDataProvider.h>

#include "varsync/dtype.hpp"
#include "varsync/error.hpp"
#include "fuzz_check.hpp"
#include "varsync/synchronization.hpp"

using namespace varsync;

namespace {

std::string lower(std::string_view s) {
  std::string out{s};
  for (auto& c : out)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

template <class T>
void check_text_result(const caf::expected<T>& r, std::string_view text,
                       errc code) {
  if (r) {
    // Accepted spellings are the canonical name in any letter case.
    FUZZ_CHECK(lower(text) == to_string(*r), "accepted a non-canonical name");
    return;
  }
  FUZZ_CHECK(has_code(r.error(), code), "unexpected error code");
  FUZZ_CHECK(!describe(r.error()).empty(), "empty error description");
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in{data, size};
  auto selector = in.ConsumeIntegral<uint8_t>();
  auto number = in.ConsumeIntegral<int64_t>();
  auto variable = in.ConsumeRandomLengthString(64);
  auto text = in.ConsumeRemainingBytesAsString();

  switch (selector % 4) {
    case 0: {
      auto s = parse_synchronization(text, variable);
      check_text_result(s, text, errc::invalid_synchronization);
      if (s) {
        auto again = parse_synchronization(to_string(*s), variable);
        FUZZ_CHECK(again && *again == *s, "to_string does not round-trip");
      }
      auto n = parse_synchronization(number, variable);
      FUZZ_CHECK(static_cast<bool>(n) == (number >= 0 && number <= 3),
                 "integer range check of synchronization");
      if (n)
        FUZZ_CHECK(static_cast<int64_t>(*n) == number, "integer value changed");
      else
        FUZZ_CHECK(has_code(n.error(), errc::invalid_synchronization),
                   "unexpected error code");
      break;
    }
    case 1: {
      auto a = parse_aggregation(text, variable);
      check_text_result(a, text, errc::invalid_aggregation);
      if (a) {
        auto again = parse_aggregation(to_string(*a), variable);
        FUZZ_CHECK(again && *again == *a, "to_string does not round-trip");
      }
      auto n = parse_aggregation(number, variable);
      FUZZ_CHECK(static_cast<bool>(n) == (number >= 0 && number <= 3),
                 "integer range check of aggregation");
      if (n)
        FUZZ_CHECK(static_cast<int64_t>(*n) == number, "integer value changed");
      else
        FUZZ_CHECK(has_code(n.error(), errc::invalid_aggregation),
                   "unexpected error code");
      break;
    }
    case 2: {
      auto r = parse_reduce_op(text);
      check_text_result(r, text, errc::invalid_argument);
      if (r) {
        auto again = parse_reduce_op(to_string(*r));
        FUZZ_CHECK(again && *again == *r, "to_string does not round-trip");
      }
      break;
    }
    case 3: {
      auto t = parse_dtype(text);
      if (t) {
        FUZZ_CHECK(static_cast<uint8_t>(*t) <= static_cast<uint8_t>(dtype::int64),
                   "dtype out of range");
        FUZZ_CHECK(size_of(*t) != 0, "dtype without a size");
        auto again = parse_dtype(to_string(*t));
        FUZZ_CHECK(again && *again == *t, "to_string does not round-trip");
      }
      // Every dtype value, valid or not, has a printable name.
      FUZZ_CHECK(!to_string(static_cast<dtype>(number & 0xff)).empty(),
                 "empty dtype name");
      break;
    }
  }
  return 0;
}
