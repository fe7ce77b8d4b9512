//===- SafeTensors.cpp - read and write .safetensors files ----------------===//
//
// The JSON header is parsed by yaml-cpp (JSON is YAML flow style); every
// size and offset is checked before any byte is copied, so a truncated or
// hostile file yields a message, never an out-of-bounds read.
//
//===----------------------------------------------------------------------===//

#include "planner/plan/SafeTensors.h"

#include "planner/plan/FileText.h"
#include "planner/plan/JsonText.h"

#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <optional>
#include <set>
#include <sstream>

namespace sharc::plan {
namespace {

/// The reference implementation refuses larger headers too; it bounds the
/// memory a hostile length field can make us allocate.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

std::optional<DType> parseSafeTensorsDType(std::string_view name) {
  if (name == "F32")
    return DType::F32;
  if (name == "BF16")
    return DType::BF16;
  if (name == "I32")
    return DType::I32;
  if (name == "F64")
    return DType::F64;
  return std::nullopt;
}

const char *safeTensorsDTypeName(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return "F32";
  case DType::BF16:
    return "BF16";
  case DType::I32:
    return "I32";
  case DType::F64:
    return "F64";
  }
  return "?";
}

/// The IEEE binary16 value of `bits` as a float, exactly (every half is a
/// float): subnormals, infinities and NaNs included.
float halfToFloat(uint16_t bits) {
  uint32_t sign = static_cast<uint32_t>(bits & 0x8000) << 16;
  uint32_t exponent = (bits >> 10) & 0x1f;
  uint32_t mantissa = bits & 0x3ff;
  uint32_t word = 0;
  if (exponent == 0x1f) {
    word = sign | 0x7f800000u | (mantissa << 13);
  } else if (exponent != 0) {
    word = sign | ((exponent + 112) << 23) | (mantissa << 13);
  } else if (mantissa != 0) {
    // A subnormal half, mantissa * 2^-24, is a normal float.
    float value = std::ldexp(static_cast<float>(mantissa), -24);
    return sign ? -value : value;
  } else {
    word = sign;
  }
  float value;
  std::memcpy(&value, &word, sizeof(value));
  return value;
}

/// F16 tensor bytes widened to F32 (exact).
std::vector<uint8_t> widenHalves(const uint8_t *data, int64_t numBytes) {
  std::vector<uint8_t> wide(static_cast<size_t>(numBytes * 2));
  for (int64_t i = 0; i < numBytes / 2; ++i) {
    uint16_t bits = static_cast<uint16_t>(data[2 * i] | (data[2 * i + 1] << 8));
    float value = halfToFloat(bits);
    std::memcpy(wide.data() + 4 * i, &value, sizeof(value));
  }
  return wide;
}

std::optional<int64_t> byteSize(const std::vector<int64_t> &shape,
                                int64_t elementBytes) {
  int64_t size = elementBytes;
  for (int64_t dim : shape)
    if (dim < 0 || __builtin_mul_overflow(size, dim, &size))
      return std::nullopt;
  return size;
}

std::optional<int64_t> parseCount(const YAML::Node &node) {
  if (!node.IsScalar())
    return std::nullopt;
  const std::string &text = node.Scalar();
  int64_t value = -1;
  auto [end, error] =
      std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || value < 0)
    return std::nullopt;
  return value;
}

bool parseCounts(const YAML::Node &node, std::vector<int64_t> &values) {
  if (!node.IsSequence())
    return false;
  for (const YAML::Node &item : node) {
    std::optional<int64_t> value = parseCount(item);
    if (!value)
      return false;
    values.push_back(*value);
  }
  return true;
}

std::string formatCounts(const std::vector<int64_t> &values) {
  std::string result = "[";
  for (size_t i = 0; i < values.size(); ++i)
    result += (i ? "," : "") + std::to_string(values[i]);
  return result + "]";
}

struct Extent {
  int64_t begin;
  int64_t end;
  const NamedTensor *tensor;
  bool isHalf = false; ///< F16 in the file, F32 once read
};

/// Reads one tensor's header entry and checks it against the data size.
Status readEntry(const std::string &name, const YAML::Node &entry,
                 int64_t dataBytes, NamedTensor &tensor, Extent &extent) {
  const std::string where = "tensor '" + name + "'";
  if (!entry.IsMap())
    return Status::invalidInput(where + ": expected a map");
  for (auto it = entry.begin(); it != entry.end(); ++it) {
    std::string key = it->first.IsScalar() ? it->first.Scalar() : "?";
    if (key != "dtype" && key != "shape" && key != "data_offsets")
      return Status::invalidInput(where + ": unknown key '" + key +
                                  "' (expected dtype, shape, data_offsets)");
  }
  // A const lookup of a missing key gives yaml-cpp's invalid node, whose
  // every query throws (found by the safetensors fuzzer).
  for (const char *key : {"dtype", "shape", "data_offsets"})
    if (!entry[key].IsDefined())
      return Status::invalidInput(where + ": missing key '" + key + "'");
  YAML::Node dtypeNode = entry["dtype"];
  std::string dtypeText = dtypeNode.IsScalar() ? dtypeNode.Scalar() : "";
  // F16 (a released model's weights, say) is widened to F32 on load.
  bool isHalf = dtypeText == "F16";
  std::optional<DType> dtype =
      isHalf ? DType::F32 : parseSafeTensorsDType(dtypeText);
  if (!dtype)
    return Status::invalidInput(where + ": unsupported dtype '" + dtypeText +
                                "' (sharc reads F32, BF16, F16 as F32, I32 "
                                "and F64)");
  tensor.name = name;
  tensor.dtype = *dtype;
  if (!parseCounts(entry["shape"], tensor.shape))
    return Status::invalidInput(
        where + ": shape must be a list of non-negative integers");
  std::vector<int64_t> offsets;
  if (!parseCounts(entry["data_offsets"], offsets) || offsets.size() != 2 ||
      offsets[0] > offsets[1])
    return Status::invalidInput(
        where + ": data_offsets must be [begin, end] with begin <= end");
  if (offsets[1] > dataBytes)
    return Status::invalidInput(where + ": data_offsets " +
                                formatCounts(offsets) +
                                " run past the end of the data (" +
                                std::to_string(dataBytes) + " bytes)");
  std::optional<int64_t> numBytes =
      byteSize(tensor.shape, isHalf ? 2 : dtypeSize(tensor.dtype));
  if (!numBytes || *numBytes != offsets[1] - offsets[0])
    return Status::invalidInput(
        where + ": shape " + formatCounts(tensor.shape) + " of " + dtypeText +
        " needs " + (numBytes ? std::to_string(*numBytes) : "too many") +
        " bytes, but data_offsets " + formatCounts(offsets) + " hold " +
        std::to_string(offsets[1] - offsets[0]));
  extent = {offsets[0], offsets[1], nullptr, isHalf};
  return Status::ok();
}

/// Reads the header's tensor entries and metadata into `file`, with each
/// tensor's extent of the data.
Status readHeader(const YAML::Node &header, std::string_view data,
                  const std::string &fileName, TensorFile &file,
                  std::vector<Extent> &extents) {
  std::set<std::string> names;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (!it->first.IsScalar())
      return Status::invalidInput(fileName + ": header keys must be strings");
    const std::string name = it->first.Scalar();
    if (!names.insert(name).second)
      return Status::invalidInput(fileName + ": duplicate key '" + name +
                                  "' in the header");
    if (name == "__metadata__") {
      if (!it->second.IsMap())
        return Status::invalidInput(
            fileName + ": __metadata__ must map strings to strings");
      for (auto entry = it->second.begin(); entry != it->second.end();
           ++entry) {
        if (!entry->first.IsScalar() || !entry->second.IsScalar())
          return Status::invalidInput(
              fileName + ": __metadata__ must map strings to strings");
        file.metadata[entry->first.Scalar()] = entry->second.Scalar();
      }
      continue;
    }
    NamedTensor tensor;
    Extent extent;
    Status status = readEntry(
        name, it->second, static_cast<int64_t>(data.size()), tensor, extent);
    if (!status)
      return status.withContext(fileName);
    if (extent.isHalf)
      tensor.bytes = widenHalves(
          reinterpret_cast<const uint8_t *>(data.data()) + extent.begin,
          extent.end - extent.begin);
    else
      tensor.bytes.assign(data.begin() + extent.begin,
                          data.begin() + extent.end);
    file.tensors.push_back(std::move(tensor));
    extents.push_back(extent);
  }

  return Status::ok();
}

} // namespace

const NamedTensor *TensorFile::find(const std::string &name) const {
  for (const NamedTensor &tensor : tensors)
    if (tensor.name == name)
      return &tensor;
  return nullptr;
}

Result<TensorFile> parseSafeTensors(std::string_view fileBytes,
                                    const std::string &fileName) {
  auto invalid = [&](const std::string &message) {
    return Status::invalidInput(fileName + ": " + message);
  };
  const uint64_t fileSize = fileBytes.size();
  if (fileSize < 8)
    return invalid("file is " + std::to_string(fileSize) +
                   " bytes, too short for the 8-byte header length");
  uint64_t headerBytes = 0;
  for (int i = 7; i >= 0; --i)
    headerBytes = (headerBytes << 8) | static_cast<uint8_t>(fileBytes[i]);
  if (headerBytes > kMaxHeaderBytes)
    return invalid("header length " + std::to_string(headerBytes) +
                   " exceeds the limit of " + std::to_string(kMaxHeaderBytes) +
                   " bytes");
  if (headerBytes > fileSize - 8)
    return invalid("header length " + std::to_string(headerBytes) +
                   " exceeds the " + std::to_string(fileSize - 8) +
                   " bytes after it (truncated file?)");
  std::string_view headerText = fileBytes.substr(8, headerBytes);
  std::string_view data = fileBytes.substr(8 + headerBytes);
  if (headerText.empty() || headerText.front() != '{')
    return invalid("header must be a JSON object starting with '{'");

  YAML::Node header;
  try {
    header = YAML::Load(std::string(headerText));
  } catch (const YAML::DeepRecursion &) {
    return invalid("header is not valid JSON: nesting deeper than the YAML "
                   "parser allows");
  } catch (const YAML::Exception &error) {
    return invalid("header is not valid JSON: " + error.msg);
  }
  if (!header.IsMap())
    return invalid("header must be a JSON object");

  TensorFile file;
  std::vector<Extent> extents;
  // Every lookup is checked first; the catch is for a yaml-cpp corner that
  // throws where no check reached, which must not escape as a crash.
  try {
    SHARC_TRY(readHeader(header, data, fileName, file, extents));
  } catch (const YAML::Exception &error) {
    return invalid("header cannot be read: " + error.msg);
  }

  for (size_t i = 0; i < extents.size(); ++i)
    extents[i].tensor = &file.tensors[i];
  std::sort(extents.begin(), extents.end(),
            [](const Extent &a, const Extent &b) {
              return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
            });
  // Empty tensors own no bytes, so they cannot overlap anything.
  const Extent *previous = nullptr;
  for (const Extent &extent : extents) {
    if (extent.begin == extent.end)
      continue;
    if (previous && extent.begin < previous->end)
      return invalid("tensors '" + previous->tensor->name + "' " +
                     formatCounts({previous->begin, previous->end}) + " and '" +
                     extent.tensor->name + "' " +
                     formatCounts({extent.begin, extent.end}) + " overlap");
    previous = &extent;
  }
  std::sort(file.tensors.begin(), file.tensors.end(),
            [](const NamedTensor &a, const NamedTensor &b) {
              return a.name < b.name;
            });
  return file;
}

Result<TensorFile> readSafeTensors(const std::string &path) {
  Result<std::string> bytes = readWholeFile(path, "");
  if (!bytes.isOk())
    return bytes.status();
  return parseSafeTensors(*bytes, path);
}

Status writeSafeTensors(const std::string &path, const TensorFile &file) {
  std::vector<const NamedTensor *> order;
  for (const NamedTensor &tensor : file.tensors)
    order.push_back(&tensor);
  std::sort(order.begin(), order.end(),
            [](const NamedTensor *a, const NamedTensor *b) {
              return a->name < b->name;
            });

  // Field order and compact separators follow the reference writer, so a
  // file of one dtype is byte-identical to what PyTorch would write.
  std::string header = "{";
  if (!file.metadata.empty()) {
    header += "\"__metadata__\":{";
    for (const auto &[key, value] : file.metadata)
      header += (header.back() == '{' ? "" : ",") + jsonString(key) + ":" +
                jsonString(value);
    header += "}";
  }
  int64_t offset = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    const NamedTensor &tensor = *order[i];
    std::optional<int64_t> numBytes =
        byteSize(tensor.shape, dtypeSize(tensor.dtype));
    if (tensor.name.empty() || tensor.name == "__metadata__" ||
        (i > 0 && order[i - 1]->name == tensor.name))
      return Status::runtimeError("cannot write '" + path + "': tensor name '" +
                                  tensor.name +
                                  "' is empty, reserved or "
                                  "repeated");
    if (!numBytes || *numBytes != static_cast<int64_t>(tensor.bytes.size()))
      return Status::runtimeError(
          "cannot write '" + path + "': tensor '" + tensor.name + "' has " +
          std::to_string(tensor.bytes.size()) + " bytes for shape " +
          formatCounts(tensor.shape));
    header +=
        (header.back() == '{' ? "" : ",") + jsonString(tensor.name) +
        ":{\"dtype\":\"" + safeTensorsDTypeName(tensor.dtype) +
        "\",\"shape\":" + formatCounts(tensor.shape) +
        ",\"data_offsets\":" + formatCounts({offset, offset + *numBytes}) + "}";
    offset += *numBytes;
  }
  header += "}";
  header.append((8 - header.size() % 8) % 8, ' ');

  char length[8];
  for (int i = 0; i < 8; ++i)
    length[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  std::vector<std::string_view> pieces{{length, sizeof(length)}, header};
  for (const NamedTensor *tensor : order)
    pieces.emplace_back(reinterpret_cast<const char *>(tensor->bytes.data()),
                        tensor->bytes.size());
  return writeFileAtomically(path, pieces, "");
}

std::vector<double> tensorAsDoubles(const NamedTensor &tensor) {
  const int64_t elementBytes = dtypeSize(tensor.dtype);
  std::vector<double> values(tensor.bytes.size() / elementBytes);
  const uint8_t *source = tensor.bytes.data();
  for (size_t i = 0; i < values.size(); ++i, source += elementBytes) {
    switch (tensor.dtype) {
    case DType::F32: {
      float value;
      std::memcpy(&value, source, sizeof(value));
      values[i] = value;
      break;
    }
    case DType::BF16: {
      uint16_t bits;
      std::memcpy(&bits, source, sizeof(bits));
      values[i] = bf16ToFloat(bits);
      break;
    }
    case DType::I32: {
      int32_t value;
      std::memcpy(&value, source, sizeof(value));
      values[i] = value;
      break;
    }
    case DType::F64:
      std::memcpy(&values[i], source, sizeof(double));
      break;
    }
  }
  return values;
}

} // namespace sharc::plan
