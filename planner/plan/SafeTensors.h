//===- SafeTensors.h - read and write .safetensors files --------*- C++ -*-===//
// defines: NamedTensor, TensorFile, TensorSpec, SafeTensorsReader,
//          SafeTensorsWriter, readSafeTensors, parseSafeTensors,
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
// SafeTensorsReader and SafeTensorsWriter take a file a tensor at a time
// (a checkpoint larger than the host's memory); readSafeTensors and
// writeSafeTensors are the whole file through them.
//
// The writer sorts tensors by name and packs them without gaps, because the
// reference reader rejects any byte not covered by a tensor; the data start
// is 8-byte aligned. Tensor bytes are little-endian, as on every host sharc
// runs on.
#pragma once

#include "planner/plan/ByteVector.h"
#include "planner/plan/DType.h"
#include "planner/plan/FileText.h"
#include "planner/plan/Status.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace sharc::plan {

struct NamedTensor {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  ByteVector bytes; ///< product(shape) * dtypeSize(dtype) bytes
};

struct TensorFile {
  std::vector<NamedTensor> tensors; ///< sorted by name after reading
  std::map<std::string, std::string> metadata;

  /// The tensor called name, or nullptr.
  const NamedTensor *find(const std::string &name) const;
};

/// A tensor's name, dtype and shape, without its bytes.
struct TensorSpec {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
};

/// Reads and validates a file's header, then one tensor at a time on
/// request: a checkpoint larger than the host's memory loads with one
/// tensor's bytes in memory at once. A malformed file is invalid input
/// whose message starts with the path.
class SafeTensorsReader {
public:
  static Result<std::unique_ptr<SafeTensorsReader>>
  open(const std::string &path);
  ~SafeTensorsReader();

  const std::map<std::string, std::string> &metadata() const {
    return metadata_;
  }
  /// Sorted by name; an F16 tensor as F32, what read() gives.
  const std::vector<TensorSpec> &tensors() const { return tensors_; }
  /// The tensor called `name`, or nullptr.
  const TensorSpec *find(const std::string &name) const;
  /// Its bytes from the file; invalid input when there is none.
  Result<NamedTensor> read(const std::string &name) const;
  /// As read, into `into`, whose bytes' storage is reused where it is
  /// large enough (a loop over a model's tensors faults in no new pages).
  Status readInto(const std::string &name, NamedTensor &into) const;

private:
  SafeTensorsReader() = default;
  struct Extent {
    int64_t begin, end; ///< bytes of the file
    bool isHalf;
  };
  std::unique_ptr<FileReader> file_;
  std::map<std::string, std::string> metadata_;
  std::vector<TensorSpec> tensors_;
  std::vector<Extent> extents_; ///< tensors_'s
};

/// Writes a file a tensor at a time: create() writes the header of every
/// tensor, write() takes their bytes in order() (by name), commit()
/// renames the whole file into place (writeSafeTensors's temporary and
/// rename). Destroyed before commit(), it leaves nothing at the path.
class SafeTensorsWriter {
public:
  static Result<std::unique_ptr<SafeTensorsWriter>>
  create(const std::string &path,
         const std::map<std::string, std::string> &metadata,
         std::vector<TensorSpec> tensors);
  ~SafeTensorsWriter();

  const std::vector<TensorSpec> &order() const { return order_; }
  /// The next tensor of order(), of its dtype and shape.
  Status write(const NamedTensor &tensor);
  /// After the last tensor.
  Status commit();

private:
  SafeTensorsWriter() = default;
  std::string path_;
  std::unique_ptr<AtomicFileWriter> file_;
  std::vector<TensorSpec> order_;
  size_t next_ = 0;
};

/// Reads and validates a whole file (SafeTensorsReader, every tensor).
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
