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

} // namespace

void DivergenceWatch::see(const plan::NamedTensor &tensor, bool isState) {
  std::optional<std::string> &first = isState ? moment_ : param_;
  if (first)
    return;
  if (std::optional<bool> isNan = firstNonFiniteIsNan(tensor))
    first = std::string(isState ? "AdamW moment" : "parameter") + " '" +
            tensor.name + "' holds " + (*isNan ? "nan" : "inf");
}

std::optional<std::string> DivergenceWatch::verdict() const {
  if (moment_)
    return "the gradient norm is not finite (" + *moment_ + ")";
  return param_;
}

Result<std::optional<std::string>> findDivergence(const Runtime &runtime) {
  DivergenceWatch watch;
  for (const Runtime::SavedTensor &saved : runtime.optimizerStateTensors()) {
    auto tensor = runtime.gatherSaved(saved);
    if (!tensor)
      return tensor.status();
    watch.see(*tensor, true);
    // The moments decide the verdict once one holds a non-finite value.
    if (watch.verdict())
      return watch.verdict();
  }
  for (const Runtime::SavedTensor &saved : runtime.paramTensors()) {
    auto tensor = runtime.gatherSaved(saved);
    if (!tensor)
      return tensor.status();
    watch.see(*tensor, false);
    if (watch.verdict())
      return watch.verdict();
  }
  return std::optional<std::string>();
}

} // namespace sharc::exec
