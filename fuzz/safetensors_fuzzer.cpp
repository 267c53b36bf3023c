// Fuzzes the checkpoint reader, varsync::safetensors::decode
// (api/ext/safetensors_format.hpp), on the raw bytes of a file.
//
// Properties: decode never crashes or throws; it either fails with
// checkpoint_corrupt or returns tensors that are consistent (valid dtype,
// element count = product of the shape, every byte readable) and that, with
// the metadata, encode to a file that decodes to the same tensors.

#include <cstddef>
#include <cstdint>
#include <span>

#include "varsync/error.hpp"
#include "varsync/tensor.hpp"
#include "fuzz_check.hpp"
#include "api/ext/safetensors_format.hpp"

using namespace varsync;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const std::byte> bytes{reinterpret_cast<const std::byte*>(data),
                                   size};
  auto file = safetensors::decode(bytes);
  if (!file) {
    FUZZ_CHECK(has_code(file.error(), errc::checkpoint_corrupt),
               "decode failed without checkpoint_corrupt");
    return 0;
  }
  size_t total = 0;
  for (auto& [name, t] : file->tensors) {
    FUZZ_CHECK(static_cast<uint8_t>(t.type())
                 <= static_cast<uint8_t>(dtype::int64),
               "invalid dtype");
    auto n = element_count(t.shape());
    FUZZ_CHECK(n >= 0 && n == t.size(), "element count != product of shape");
    FUZZ_CHECK(static_cast<unsigned __int128>(t.size()) * size_of(t.type())
                 == t.nbytes(),
               "byte count != elements x dtype size");
    auto* p = static_cast<const unsigned char*>(t.raw());
    unsigned sum = 0;
    for (size_t i = 0; i < t.nbytes(); ++i)
      sum += p[i];
    (void) sum;
    total += t.nbytes();
    FUZZ_CHECK(file->find(name) != nullptr, "find misses a decoded tensor");
  }
  FUZZ_CHECK(total <= size, "decoded more data than the file holds");

  // What was decoded encodes again (names are unique JSON keys, so encode
  // only fails for names it reserves or cannot write as strict UTF-8)...
  auto again = safetensors::encode(file->tensors, file->metadata);
  if (!again) {
    FUZZ_CHECK(has_code(again.error(), errc::invalid_argument),
               "encode failed without invalid_argument");
    return 0;
  }
  // ... and decodes to the same tensors and metadata.
  auto round = safetensors::decode(*again);
  FUZZ_CHECK(static_cast<bool>(round), "re-encoded file does not decode");
  FUZZ_CHECK(round->tensors.size() == file->tensors.size(),
             "round trip changed the tensor count");
  FUZZ_CHECK(round->metadata == file->metadata, "round trip changed metadata");
  for (auto& [name, t] : file->tensors) {
    auto* other = round->find(name);
    FUZZ_CHECK(other != nullptr && other->bitwise_equal(t),
               "round trip changed a tensor");
  }
  return 0;
}
