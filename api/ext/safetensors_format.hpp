#pragma once
// A pure reader / writer of the safetensors file layout for varsync tensors
// (docs/checkpoints.md):
//
//   [8 bytes: little-endian uint64 N] [N bytes: UTF-8 JSON header] [data]
//
// The header maps each tensor name to {"dtype", "shape", "data_offsets"}
// (offsets relative to the start of the data section) and may hold a
// "__metadata__" object of string -> string. The decoder is written for
// hostile input: every inconsistency yields errc::checkpoint_corrupt, it never
// throws and never allocates more than the input size justifies.

#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <caf/expected.hpp>

#include "varsync/tensor.hpp"

namespace varsync::safetensors {

/// Largest header the decoder accepts (the Python / Rust library's limit).
constexpr uint64_t max_header_bytes = 100u * 1024u * 1024u;

/// One named tensor of a file.
struct named_tensor {
  std::string name;
  tensor value;
};

/// What a file holds: tensors in data order and the "__metadata__" map.
struct decoded_file {
  std::vector<named_tensor> tensors;
  std::map<std::string, std::string> metadata;

  /// The tensor called `name`, or nullptr.
  const tensor* find(std::string_view name) const;
};

/// "F32", "F64", "I32", "I64", "F16", "BF16".
std::string_view dtype_tag(dtype t);
/// The dtype of a safetensors tag; false for tags varsync does not support.
bool parse_dtype_tag(std::string_view tag, dtype& out);

/// Encodes `tensors` (in this order, names unique, not "__metadata__") and
/// `metadata`. Fails with invalid_argument on duplicate or reserved names.
caf::expected<std::string>
encode(const std::vector<named_tensor>& tensors,
       const std::map<std::string, std::string>& metadata = {});

/// Decodes a whole file. Fails with checkpoint_corrupt, naming the problem.
caf::expected<decoded_file> decode(std::span<const std::byte> bytes);
caf::expected<decoded_file> decode(const std::string& bytes);

} // namespace varsync::safetensors
