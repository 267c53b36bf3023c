#pragma once
// Host conversions for the 16-bit float formats, bit for bit: the host
// kernels' and the reductions' business. Users write and read float16 and
// bfloat16 values as floats (tensor::from_floats, tensor::to_vector<float>).
// Arithmetic on float16 and bfloat16 is done in float32 and rounded back
// (round to nearest even).

#include <cstdint>
#include <cstring>

namespace varsync {

inline float bits_to_float(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

inline uint32_t float_to_bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

inline float bfloat16_to_float(uint16_t h) {
  return bits_to_float(static_cast<uint32_t>(h) << 16);
}

inline uint16_t float_to_bfloat16(float f) {
  uint32_t b = float_to_bits(f);
  if ((b & 0x7f800000u) == 0x7f800000u && (b & 0x007fffffu))
    return static_cast<uint16_t>((b >> 16) | 0x40); // quiet NaN
  b += 0x7fffu + ((b >> 16) & 1u);
  return static_cast<uint16_t>(b >> 16);
}

inline float float16_to_float(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t man = h & 0x3ffu;
  if (exp == 0) {
    if (man == 0)
      return bits_to_float(sign);
    // Subnormal: value = man * 2^-24.
    float v = static_cast<float>(man) * (1.0f / 16777216.0f);
    return sign ? -v : v;
  }
  if (exp == 31)
    return bits_to_float(sign | 0x7f800000u | (man << 13));
  return bits_to_float(sign | ((exp + 112u) << 23) | (man << 13));
}

inline uint16_t float_to_float16(float f) {
  uint32_t b = float_to_bits(f);
  uint16_t sign = static_cast<uint16_t>((b >> 16) & 0x8000u);
  uint32_t exp = (b >> 23) & 0xffu;
  uint32_t man = b & 0x7fffffu;
  if (exp == 0xff) // inf or NaN
    return sign | 0x7c00u | (man ? 0x200u : 0u);
  int e = static_cast<int>(exp) - 127 + 15;
  if (e >= 31)
    return sign | 0x7c00u; // overflow to infinity
  if (e <= 0) {
    if (e < -10)
      return sign; // underflow to zero
    man |= 0x800000u;
    uint32_t shift = static_cast<uint32_t>(14 - e);
    uint32_t half_man = man >> shift;
    uint32_t rem = man & ((1u << shift) - 1u);
    uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (half_man & 1u)))
      ++half_man;
    return sign | static_cast<uint16_t>(half_man);
  }
  uint32_t out = (static_cast<uint32_t>(e) << 10) | (man >> 13);
  uint32_t rem = man & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (out & 1u)))
    ++out; // may carry into the exponent, which is the right rounding
  return sign | static_cast<uint16_t>(out);
}

} // namespace varsync
