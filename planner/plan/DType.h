//===- DType.h - element types shared by plans and kernels ------*- C++ -*-===//
// defines: DType, dtypeSize, dtypeName, parseDType, bf16 conversions
//
// bf16 is stored as the upper 16 bits of an IEEE float32; conversion from
// float rounds to nearest even, like PyTorch, so CPU results match it bit
// for bit where the math does. F64 exists for the CPU kernels' float64
// finite-difference checks only; plans never use it.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

namespace sharc {

enum class DType : uint8_t { F32, BF16, I32, F64 };

inline int64_t dtypeSize(DType dtype) {
  switch (dtype) {
  case DType::F32:
  case DType::I32:
    return 4;
  case DType::BF16:
    return 2;
  case DType::F64:
    return 8;
  }
  return 0;
}

inline const char *dtypeName(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return "f32";
  case DType::BF16:
    return "bf16";
  case DType::I32:
    return "i32";
  case DType::F64:
    return "f64";
  }
  return "?";
}

inline std::optional<DType> parseDType(std::string_view name) {
  if (name == "f32")
    return DType::F32;
  if (name == "bf16")
    return DType::BF16;
  if (name == "i32")
    return DType::I32;
  if (name == "f64")
    return DType::F64;
  return std::nullopt;
}

inline float bf16ToFloat(uint16_t bits) {
  uint32_t wide = static_cast<uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &wide, sizeof(value));
  return value;
}

inline uint16_t floatToBf16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  if ((bits & 0x7f800000u) == 0x7f800000u && (bits & 0x007fffffu) != 0)
    return static_cast<uint16_t>((bits >> 16) | 0x0040u); // quiet NaN
  uint32_t roundingBias = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + roundingBias) >> 16);
}

} // namespace sharc
