#include "varsync/dtype.hpp"

namespace varsync {

std::string_view to_string(dtype t) {
  switch (t) {
    case dtype::float16: return "float16";
    case dtype::bfloat16: return "bfloat16";
    case dtype::float32: return "float32";
    case dtype::float64: return "float64";
    case dtype::int32: return "int32";
    case dtype::int64: return "int64";
  }
  return "invalid_dtype";
}

std::optional<dtype> parse_dtype(std::string_view s) {
  if (s == "float16" || s == "f16" || s == "F16" || s == "half")
    return dtype::float16;
  if (s == "bfloat16" || s == "bf16" || s == "BF16")
    return dtype::bfloat16;
  if (s == "float32" || s == "f32" || s == "F32" || s == "float")
    return dtype::float32;
  if (s == "float64" || s == "f64" || s == "F64" || s == "double")
    return dtype::float64;
  if (s == "int32" || s == "i32" || s == "I32")
    return dtype::int32;
  if (s == "int64" || s == "i64" || s == "I64")
    return dtype::int64;
  return std::nullopt;
}

} // namespace varsync
