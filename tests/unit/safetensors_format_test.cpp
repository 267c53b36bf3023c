// Unit tests for the safetensors reader / writer (api/ext/safetensors_format.hpp):
// round trips for every dtype and hostile inputs, which must fail with
// checkpoint_corrupt and never crash.

#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "varsync/error.hpp"
#include "varsync/tensor.hpp"
#include "api/ext/safetensors_format.hpp"

using namespace varsync;
namespace st = varsync::safetensors;

namespace {

// A file made of a given header text and data bytes.
std::string make_file(const std::string& header, const std::string& data) {
  std::string out;
  uint64_t n = header.size();
  for (int b = 0; b < 8; ++b)
    out.push_back(static_cast<char>((n >> (8 * b)) & 0xff));
  return out + header + data;
}

void check_corrupt(const std::string& bytes) {
  auto decoded = st::decode(bytes);
  INFO("input header: " << (bytes.size() > 8 ? bytes.substr(8, 200) : ""));
  REQUIRE_FALSE(decoded);
  INFO(describe(decoded.error()));
  CHECK(has_code(decoded.error(), errc::checkpoint_corrupt));
  CHECK_FALSE(message_of(decoded.error()).empty());
}

tensor raw_tensor(dtype t, tensor_shape shape) {
  auto x = tensor::empty(t, shape);
  auto* p = static_cast<unsigned char*>(x.mutable_raw());
  for (size_t i = 0; i < x.nbytes(); ++i)
    p[i] = static_cast<unsigned char>(i * 7 + 3);
  return x;
}

} // namespace

TEST_CASE("safetensors: every dtype round-trips", "[safetensors]") {
  std::vector<st::named_tensor> in{
    {"f16", raw_tensor(dtype::float16, {2, 3})},
    {"bf16", raw_tensor(dtype::bfloat16, {5})},
    {"f32", tensor::from_vector<float>({2, 2}, {1.5f, -2, 3, 4})},
    {"f64", tensor::scalar<double>(3.25)},
    {"i32", tensor::from_vector<int32_t>({3}, {-1, 0, 7})},
    {"i64", tensor::from_vector<int64_t>({1, 2}, {INT64_MIN, INT64_MAX})},
    {"empty", tensor::zeros(dtype::float32, {0, 4})},
  };
  std::map<std::string, std::string> meta{{"k", "v"}, {"x.sync", "on_read"}};
  auto bytes = st::encode(in, meta);
  REQUIRE(bytes);
  // The data section starts 8-byte aligned.
  uint64_t n = 0;
  std::memcpy(&n, bytes->data(), 8);
  CHECK(n % 8 == 0);
  auto out = st::decode(*bytes);
  REQUIRE(out);
  CHECK(out->metadata == meta);
  REQUIRE(out->tensors.size() == in.size());
  for (auto& t : in) {
    auto* got = out->find(t.name);
    REQUIRE(got != nullptr);
    CHECK(got->bitwise_equal(t.value));
  }
  // The header is the documented JSON.
  auto header = nlohmann::json::parse(bytes->substr(8, n));
  CHECK(header["f32"]["dtype"] == "F32");
  CHECK(header["bf16"]["dtype"] == "BF16");
  CHECK(header["f16"]["dtype"] == "F16");
  CHECK(header["i64"]["dtype"] == "I64");
  CHECK(header["f32"]["shape"] == nlohmann::json::array({2, 2}));
  CHECK(header["f64"]["shape"] == nlohmann::json::array());
  CHECK(header["f16"]["data_offsets"] == nlohmann::json::array({0, 12}));
  CHECK(header["__metadata__"]["k"] == "v");
}

TEST_CASE("safetensors: encode rejects duplicate and reserved names",
          "[safetensors]") {
  auto x = tensor::scalar<float>(1);
  auto dup = st::encode({{"a", x}, {"a", x}});
  REQUIRE_FALSE(dup);
  CHECK(has_code(dup.error(), errc::invalid_argument));
  auto reserved = st::encode({{"__metadata__", x}});
  REQUIRE_FALSE(reserved);
  auto empty = st::encode({});
  REQUIRE(empty);
  auto decoded = st::decode(*empty);
  REQUIRE(decoded);
  CHECK(decoded->tensors.empty());
}

TEST_CASE("safetensors: decoder accepts any entry order", "[safetensors]") {
  auto file = make_file(
    R"({"b":{"dtype":"I32","shape":[1],"data_offsets":[4,8]},)"
    R"("a":{"dtype":"I32","shape":[],"data_offsets":[0,4]}})",
    std::string("\x01\x00\x00\x00\x02\x00\x00\x00", 8));
  auto out = st::decode(file);
  REQUIRE(out);
  CHECK(out->find("a")->to_vector<int32_t>() == std::vector<int32_t>{1});
  CHECK(out->find("b")->to_vector<int32_t>() == std::vector<int32_t>{2});
}

TEST_CASE("safetensors: corrupt inputs fail with checkpoint_corrupt",
          "[safetensors]") {
  auto good = st::encode({{"a", tensor::from_vector<float>({2}, {1, 2})},
                          {"b", tensor::scalar<int64_t>(5)}},
                         {{"m", "v"}});
  REQUIRE(good);
  const std::string entry_a =
    R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  const std::string data8(8, '\0');
  SECTION("empty file and truncated header length") {
    check_corrupt("");
    check_corrupt(good->substr(0, 5));
  }
  SECTION("header length larger than the file") {
    check_corrupt(good->substr(0, 20));
    auto huge = *good;
    huge[7] = '\x7f'; // ~ 9e18 bytes
    check_corrupt(huge);
    auto big = *good;
    std::memset(big.data(), 0, 8);
    big[3] = '\x10'; // 256 MiB > the 100 MB cap
    check_corrupt(big);
  }
  SECTION("truncated data") {
    for (size_t cut = 1; cut <= 12; ++cut)
      check_corrupt(good->substr(0, good->size() - cut));
  }
  SECTION("every prefix fails cleanly") {
    for (size_t len = 0; len < good->size(); ++len)
      CHECK_FALSE(st::decode(good->substr(0, len)));
  }
  SECTION("trailing bytes") {
    check_corrupt(*good + "x");
  }
  SECTION("invalid JSON and wrong types") {
    check_corrupt(make_file("{\"a\": ", data8));
    check_corrupt(make_file("not json at all", data8));
    check_corrupt(make_file("[1, 2]", data8));
    check_corrupt(make_file(R"({"a": 3})", data8));
    check_corrupt(make_file(R"({"a":{"dtype":"F32","shape":[2]}})", data8));
    check_corrupt(make_file(
      R"({"a":{"dtype":7,"shape":[2],"data_offsets":[0,8]}})", data8));
    check_corrupt(make_file(
      R"({"a":{"dtype":"F32","shape":"2","data_offsets":[0,8]}})", data8));
    check_corrupt(make_file(
      R"({"a":{"dtype":"F32","shape":[2.5],"data_offsets":[0,8]}})", data8));
    check_corrupt(make_file(
      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0]}})", data8));
    check_corrupt(make_file(
      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":["0","8"]}})",
      data8));
    check_corrupt(make_file("{" + entry_a + R"(,"__metadata__":{"k":1}})",
                            data8));
    check_corrupt(make_file("{" + entry_a + R"(,"__metadata__":[1]})", data8));
    // Invalid UTF-8 inside a string.
    check_corrupt(make_file("{\"\xff\xfe\":{}}", data8));
  }
  SECTION("unknown dtype") {
    check_corrupt(make_file(
      R"({"a":{"dtype":"U8","shape":[8],"data_offsets":[0,8]}})", data8));
    check_corrupt(make_file(
      R"({"a":{"dtype":"BOOL","shape":[8],"data_offsets":[0,8]}})", data8));
  }
  SECTION("offsets out of range") {
    check_corrupt(make_file(
      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})", data8));
    check_corrupt(make_file(
      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,18446744073709551615]}})",
      data8));
    check_corrupt(make_file(
      R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,-8]}})", data8));
    check_corrupt(make_file(
      R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[4,0]}})", data8));
  }
  SECTION("overlapping and non-contiguous offsets") {
    check_corrupt(make_file(
      "{" + entry_a
        + R"(,"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
      data8));
    check_corrupt(make_file(
      R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", data8));
    check_corrupt(make_file(
      "{" + entry_a
        + R"(,"b":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
      std::string(16, '\0')));
  }
  SECTION("dtype and shape do not match the byte count") {
    check_corrupt(make_file(
      R"({"a":{"dtype":"F64","shape":[2],"data_offsets":[0,8]}})", data8));
    check_corrupt(make_file(
      R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", data8));
    check_corrupt(make_file(
      R"({"a":{"dtype":"F32","shape":[],"data_offsets":[0,8]}})", data8));
  }
  SECTION("negative and overflowing shapes") {
    check_corrupt(make_file(
      R"({"a":{"dtype":"F32","shape":[-1,-2],"data_offsets":[0,8]}})", data8));
    check_corrupt(make_file(
      R"({"a":{"dtype":"F32","shape":[4294967296,4294967296,2],"data_offsets":[0,8]}})",
      data8));
    check_corrupt(make_file(
      R"({"a":{"dtype":"F32","shape":[4611686018427387904,4,0],"data_offsets":[0,0]}})",
      ""));
    check_corrupt(make_file(
      R"({"a":{"dtype":"I64","shape":[2305843009213693952],"data_offsets":[0,8]}})",
      data8));
    check_corrupt(make_file(
      R"({"a":{"dtype":"F32","shape":[1e30],"data_offsets":[0,8]}})", data8));
  }
  SECTION("single-byte corruption never crashes") {
    for (size_t i = 0; i < good->size(); ++i) {
      auto bad = *good;
      bad[i] = static_cast<char>(bad[i] ^ 0x5a);
      auto out = st::decode(bad); // may still decode (data bytes)
      if (!out)
        CHECK(has_code(out.error(), errc::checkpoint_corrupt));
    }
  }
}

// Regression (fuzz finding, fuzz/findings/README.md): the error message for
// a bad shape used to dump the JSON value, which recursed once per level and
// overflowed the stack for an array nested 100,000 deep.
TEST_CASE("safetensors: a deeply nested shape fails without recursion",
          "[safetensors]") {
  const int depth = 100000;
  std::string header = R"({"a":{"dtype":"F32","shape":[)" + std::string(depth, '[')
                       + std::string(depth, ']')
                       + R"(],"data_offsets":[0,0]}})";
  check_corrupt(make_file(header, ""));
}

TEST_CASE("safetensors: encode refuses a header that decode would refuse "
          "(over max_header_bytes)",
          "[safetensors]") {
  auto x = tensor::scalar<float>(1.f);
  std::map<std::string, std::string> meta{
    {"big", std::string(st::max_header_bytes, 'x')}};
  auto bytes = st::encode({{"x", x}}, meta);
  REQUIRE_FALSE(bytes);
  CHECK(has_code(bytes.error(), errc::invalid_argument));
  CHECK(message_of(bytes.error()).find("exceeds the limit")
        != std::string::npos);
  // Just under the limit: written, and decode accepts it.
  meta["big"] = std::string(st::max_header_bytes - 4096, 'x');
  auto ok = st::encode({{"x", x}}, meta);
  REQUIRE(ok);
  CHECK(st::decode(*ok));
}
