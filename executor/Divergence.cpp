//===- Divergence.cpp - find a diverged training state --------------------===//

#include "executor/Divergence.h"

#include <algorithm>
#include <cstring>

namespace sharc::exec {
namespace {

/// Of `count` little-endian IEEE words, whether the first one that is not
/// finite (exponent bits all ones) is a NaN (some mantissa bit set);
/// nullopt when all are finite. Each chunk is tested without a branch per
/// element, so the test runs at memory speed (a checkpoint passes through
/// it); only a chunk that holds one is looked at element by element.
template <typename Word, Word kExponent, Word kMantissa>
std::optional<bool> firstNonFiniteWord(const uint8_t *bytes, size_t count) {
  constexpr size_t kChunk = 4096;
  auto wordAt = [&](size_t i) {
    Word word;
    std::memcpy(&word, bytes + i * sizeof(Word), sizeof(Word));
    return word;
  };
  for (size_t begin = 0; begin < count; begin += kChunk) {
    size_t end = std::min(count, begin + kChunk);
    bool any = false;
    for (size_t i = begin; i < end; ++i)
      any |= (wordAt(i) & kExponent) == kExponent;
    if (!any)
      continue;
    for (size_t i = begin; i < end; ++i)
      if (Word word = wordAt(i); (word & kExponent) == kExponent)
        return (word & kMantissa) != 0;
  }
  return std::nullopt;
}

/// Whether the tensor's first non-finite element is a NaN; nullopt when
/// every element is finite (an integer tensor always is).
std::optional<bool> firstNonFiniteIsNan(const plan::NamedTensor &tensor) {
  const uint8_t *bytes = tensor.bytes.data();
  const size_t size = tensor.bytes.size();
  switch (tensor.dtype) {
  case DType::F32:
    return firstNonFiniteWord<uint32_t, 0x7f800000u, 0x007fffffu>(bytes,
                                                                  size / 4);
  case DType::BF16:
    return firstNonFiniteWord<uint16_t, 0x7f80, 0x007f>(bytes, size / 2);
  case DType::F64:
    return firstNonFiniteWord<uint64_t, 0x7ff0000000000000ull,
                              0x000fffffffffffffull>(bytes, size / 8);
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
  // The moments first: once one holds a non-finite value it decides.
  DivergenceWatch watch;
  for (bool isState : {true, false})
    for (const Runtime::SavedTensor &saved :
         isState ? runtime.optimizerStateTensors() : runtime.paramTensors()) {
      auto tensor = runtime.gatherSaved(saved);
      if (!tensor)
        return tensor.status();
      watch.see(*tensor, isState);
      if (std::optional<std::string> verdict = watch.verdict())
        return verdict;
    }
  return std::optional<std::string>();
}

} // namespace sharc::exec
