#pragma once
// Element types a variable can hold. Numeric values are varsync's own (stable
// on the wire and in checkpoints); names follow numpy / safetensors spelling.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace varsync {

enum class dtype : uint8_t {
  float16 = 0,
  bfloat16 = 1,
  float32 = 2,
  float64 = 3,
  int32 = 4,
  int64 = 5,
};

constexpr size_t size_of(dtype t) {
  switch (t) {
    case dtype::float16:
    case dtype::bfloat16: return 2;
    case dtype::float32:
    case dtype::int32: return 4;
    case dtype::float64:
    case dtype::int64: return 8;
  }
  return 0;
}

constexpr bool is_floating(dtype t) {
  return t == dtype::float16 || t == dtype::bfloat16 || t == dtype::float32
         || t == dtype::float64;
}

/// False for a value outside the enum (a cast or a deserialized byte).
constexpr bool is_valid(dtype t) {
  return static_cast<uint8_t>(t) <= static_cast<uint8_t>(dtype::int64);
}

std::string_view to_string(dtype t);

/// Parses "float32", "f32", "int64", ... ; nullopt for anything else.
std::optional<dtype> parse_dtype(std::string_view text);

/// Maps a C++ element type to its dtype.
template <class T>
struct dtype_of;
template <>
struct dtype_of<float> {
  static constexpr dtype value = dtype::float32;
};
template <>
struct dtype_of<double> {
  static constexpr dtype value = dtype::float64;
};
template <>
struct dtype_of<int32_t> {
  static constexpr dtype value = dtype::int32;
};
template <>
struct dtype_of<int64_t> {
  static constexpr dtype value = dtype::int64;
};

template <class T>
constexpr dtype dtype_of_v = dtype_of<T>::value;

} // namespace varsync
