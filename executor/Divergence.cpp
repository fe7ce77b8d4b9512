//===- Divergence.cpp - find a diverged training state --------------------===//

#include "executor/Divergence.h"

#include "planner/plan/HostThreads.h"

#include <algorithm>
#include <cstring>
#include <vector>

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

/// firstNonFiniteWord over words [begin, end) of `bytes` as `dtype`.
std::optional<bool> firstNonFiniteIn(const uint8_t *bytes, DType dtype,
                                     size_t begin, size_t end) {
  switch (dtype) {
  case DType::F32:
    return firstNonFiniteWord<uint32_t, 0x7f800000u, 0x007fffffu>(
        bytes + begin * 4, end - begin);
  case DType::BF16:
    return firstNonFiniteWord<uint16_t, 0x7f80, 0x007f>(bytes + begin * 2,
                                                        end - begin);
  case DType::F64:
    return firstNonFiniteWord<uint64_t, 0x7ff0000000000000ull,
                              0x000fffffffffffffull>(bytes + begin * 8,
                                                     end - begin);
  case DType::I32:
    break;
  }
  return std::nullopt;
}

/// Whether the tensor's first non-finite element is a NaN; nullopt when
/// every element is finite (an integer tensor always is). One thread scans
/// about 5 GB/s, so a large tensor is cut into parts scanned at once; the
/// first part that holds one answers.
std::optional<bool> firstNonFiniteIsNan(const plan::NamedTensor &tensor) {
  if (tensor.dtype == DType::I32)
    return std::nullopt;
  size_t words =
      tensor.bytes.size() / static_cast<size_t>(dtypeSize(tensor.dtype));
  constexpr size_t kPartBytes = size_t{16} << 20;
  size_t parts = std::clamp<size_t>(tensor.bytes.size() / kPartBytes, 1, 16);
  size_t share = (words + parts - 1) / parts;
  std::vector<std::optional<bool>> found(parts);
  runShares(static_cast<int64_t>(parts), [&](int64_t part) {
    size_t begin = std::min(words, static_cast<size_t>(part) * share);
    found[part] = firstNonFiniteIn(tensor.bytes.data(), tensor.dtype, begin,
                                   std::min(words, begin + share));
  });
  for (const std::optional<bool> &isNan : found)
    if (isNan)
      return isNan;
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
