//===- Divergence.cpp - find a diverged training state --------------------===//

#include "executor/Divergence.h"

#include <cmath>
#include <cstring>

namespace sharc::exec {
namespace {

/// Whether every element is finite, read in place: tensorAsDoubles would
/// allocate 8 bytes per element of every parameter each step.
std::optional<bool> firstNonFiniteIsNan(const plan::NamedTensor &tensor) {
  const uint8_t *bytes = tensor.bytes.data();
  const size_t size = tensor.bytes.size();
  switch (tensor.dtype) {
  case DType::F32:
    for (size_t at = 0; at + 4 <= size; at += 4) {
      float value;
      std::memcpy(&value, bytes + at, sizeof(value));
      if (!std::isfinite(value))
        return std::isnan(value);
    }
    break;
  case DType::BF16:
    for (size_t at = 0; at + 2 <= size; at += 2) {
      uint16_t word;
      std::memcpy(&word, bytes + at, sizeof(word));
      if ((word & 0x7f80) == 0x7f80) // exponent all ones: inf or nan
        return (word & 0x007f) != 0;
    }
    break;
  case DType::F64:
    for (size_t at = 0; at + 8 <= size; at += 8) {
      double value;
      std::memcpy(&value, bytes + at, sizeof(value));
      if (!std::isfinite(value))
        return std::isnan(value);
    }
    break;
  case DType::I32:
    break;
  }
  return std::nullopt;
}

/// The first tensor with a value that is not finite, as "WHAT 'name' holds
/// nan" (or inf).
std::optional<std::string> firstNonFinite(const plan::TensorFile &file,
                                          const std::string &what) {
  for (const plan::NamedTensor &tensor : file.tensors)
    if (std::optional<bool> isNan = firstNonFiniteIsNan(tensor))
      return what + " '" + tensor.name + "' holds " + (*isNan ? "nan" : "inf");
  return std::nullopt;
}

} // namespace

Result<std::optional<std::string>> findDivergence(const Runtime &runtime) {
  auto state = runtime.gatherOptimizerState();
  if (!state)
    return state.status();
  if (auto found = firstNonFinite(*state, "AdamW moment"))
    return std::optional<std::string>("the gradient norm is not finite (" +
                                      *found + ")");
  auto params = runtime.gatherParams();
  if (!params)
    return params.status();
  return firstNonFinite(*params, "parameter");
}

} // namespace sharc::exec
