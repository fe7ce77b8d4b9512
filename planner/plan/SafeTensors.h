//===- SafeTensors.h - read and write .safetensors files --------*- C++ -*-===//
// defines: NamedTensor, TensorFile, readSafeTensors, parseSafeTensors,
//          writeSafeTensors, tensorAsDoubles
//
// The safetensors layout, as PyTorch's `safetensors` package writes it: an
// 8-byte little-endian header length N, N bytes of JSON header
//   {"__metadata__": {"k": "v"},
//    "name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]}, ...}
// padded with spaces to a multiple of 8, then the tensor bytes, with offsets
// relative to the data start. Checkpoints and PyTorch golden fixtures use it.
// sharc reads F32, BF16, I32 and F64 tensors, and F16 ones (a released
// model's weights) widened to F32 exactly; a scalar has shape [].
//
// The writer sorts tensors by name and packs them without gaps, because the
// reference reader rejects any byte not covered by a tensor; the data start
// is 8-byte aligned. Tensor bytes are little-endian, as on every host sharc
// runs on.
#pragma once

#include "planner/plan/DType.h"
#include "planner/plan/Status.h"

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace sharc::plan {

struct NamedTensor {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes; ///< product(shape) * dtypeSize(dtype) bytes
};

struct TensorFile {
  std::vector<NamedTensor> tensors; ///< sorted by name after reading
  std::map<std::string, std::string> metadata;

  /// The tensor called name, or nullptr.
  const NamedTensor *find(const std::string &name) const;
};

/// Reads and validates a file; a malformed file is invalid input whose
/// message starts with the path.
Result<TensorFile> readSafeTensors(const std::string &path);

/// Parses the bytes of a whole file; fileName only prefixes the messages.
Result<TensorFile> parseSafeTensors(std::string_view fileBytes,
                                    const std::string &fileName);

/// Writes the file through a temporary next to it and a rename, so that an
/// interrupted write never leaves a truncated checkpoint under path.
Status writeSafeTensors(const std::string &path, const TensorFile &file);

/// The elements as doubles, in row-major order (bf16 widened exactly).
std::vector<double> tensorAsDoubles(const NamedTensor &tensor);

} // namespace sharc::plan
