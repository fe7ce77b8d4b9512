//===- SafeTensors.cpp - read and write .safetensors files ----------------===//
//
// The JSON header is parsed by yaml-cpp (JSON is YAML flow style); every
// size and offset is checked before any byte is copied, so a truncated or
// hostile file yields a message, never an out-of-bounds read.
//
//===----------------------------------------------------------------------===//

#include "planner/plan/SafeTensors.h"

#include "planner/plan/HostThreads.h"

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
ByteVector widenHalves(const uint8_t *data, int64_t numBytes) {
  ByteVector wide(static_cast<size_t>(numBytes * 2));
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

/// A tensor's header entry: what it is and where its bytes lie in the data.
struct Entry {
  TensorSpec spec; ///< F16 entries as F32, what reading them gives
  int64_t begin = 0, end = 0;
  bool isHalf = false; ///< F16 in the file, F32 once read
};

struct Header {
  std::map<std::string, std::string> metadata;
  std::vector<Entry> entries; ///< sorted by name
};

/// Reads one tensor's header entry and checks it against the data size.
Status readEntry(const std::string &name, const YAML::Node &entry,
                 int64_t dataBytes, Entry &out) {
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
  TensorSpec &spec = out.spec;
  spec.name = name;
  spec.dtype = *dtype;
  if (!parseCounts(entry["shape"], spec.shape))
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
      byteSize(spec.shape, isHalf ? 2 : dtypeSize(spec.dtype));
  if (!numBytes || *numBytes != offsets[1] - offsets[0])
    return Status::invalidInput(
        where + ": shape " + formatCounts(spec.shape) + " of " + dtypeText +
        " needs " + (numBytes ? std::to_string(*numBytes) : "too many") +
        " bytes, but data_offsets " + formatCounts(offsets) + " hold " +
        std::to_string(offsets[1] - offsets[0]));
  out.begin = offsets[0];
  out.end = offsets[1];
  out.isHalf = isHalf;
  return Status::ok();
}

/// Reads the header's tensor entries and metadata.
Status readEntries(const YAML::Node &root, int64_t dataBytes,
                   const std::string &fileName, Header &header) {
  std::set<std::string> names;
  for (auto it = root.begin(); it != root.end(); ++it) {
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
        header.metadata[entry->first.Scalar()] = entry->second.Scalar();
      }
      continue;
    }
    Entry entry;
    Status status = readEntry(name, it->second, dataBytes, entry);
    if (!status)
      return status.withContext(fileName);
    header.entries.push_back(std::move(entry));
  }
  return Status::ok();
}

/// The header length in the file's first 8 bytes, checked against the
/// bytes after them.
Result<uint64_t> readHeaderLength(const char *lengthBytes, uint64_t fileSize,
                                  const std::string &fileName) {
  auto invalid = [&](const std::string &message) {
    return Status::invalidInput(fileName + ": " + message);
  };
  if (fileSize < 8)
    return invalid("file is " + std::to_string(fileSize) +
                   " bytes, too short for the 8-byte header length");
  uint64_t headerBytes = 0;
  for (int i = 7; i >= 0; --i)
    headerBytes = (headerBytes << 8) | static_cast<uint8_t>(lengthBytes[i]);
  if (headerBytes > kMaxHeaderBytes)
    return invalid("header length " + std::to_string(headerBytes) +
                   " exceeds the limit of " + std::to_string(kMaxHeaderBytes) +
                   " bytes");
  if (headerBytes > fileSize - 8)
    return invalid("header length " + std::to_string(headerBytes) +
                   " exceeds the " + std::to_string(fileSize - 8) +
                   " bytes after it (truncated file?)");
  return headerBytes;
}

/// Parses and checks the JSON header of a file whose data holds
/// `dataBytes`: every entry inside the data, none overlapping another.
Result<Header> parseHeader(std::string_view headerText, int64_t dataBytes,
                           const std::string &fileName) {
  auto invalid = [&](const std::string &message) {
    return Status::invalidInput(fileName + ": " + message);
  };
  if (headerText.empty() || headerText.front() != '{')
    return invalid("header must be a JSON object starting with '{'");
  YAML::Node root;
  try {
    root = YAML::Load(std::string(headerText));
  } catch (const YAML::DeepRecursion &) {
    return invalid("header is not valid JSON: nesting deeper than the YAML "
                   "parser allows");
  } catch (const YAML::Exception &error) {
    return invalid("header is not valid JSON: " + error.msg);
  }
  if (!root.IsMap())
    return invalid("header must be a JSON object");

  Header header;
  // Every lookup is checked first; the catch is for a yaml-cpp corner that
  // throws where no check reached, which must not escape as a crash.
  try {
    SHARC_TRY(readEntries(root, dataBytes, fileName, header));
  } catch (const YAML::Exception &error) {
    return invalid("header cannot be read: " + error.msg);
  }

  std::vector<const Entry *> extents;
  for (const Entry &entry : header.entries)
    extents.push_back(&entry);
  std::sort(extents.begin(), extents.end(), [](const Entry *a, const Entry *b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  // Empty tensors own no bytes, so they cannot overlap anything.
  const Entry *previous = nullptr;
  for (const Entry *extent : extents) {
    if (extent->begin == extent->end)
      continue;
    if (previous && extent->begin < previous->end)
      return invalid("tensors '" + previous->spec.name + "' " +
                     formatCounts({previous->begin, previous->end}) + " and '" +
                     extent->spec.name + "' " +
                     formatCounts({extent->begin, extent->end}) + " overlap");
    previous = extent;
  }
  std::sort(
      header.entries.begin(), header.entries.end(),
      [](const Entry &a, const Entry &b) { return a.spec.name < b.spec.name; });
  return header;
}

/// A tensor of `entry`'s spec holding `bytes` as stored (F16 widened).
NamedTensor tensorOf(const Entry &entry, const uint8_t *bytes) {
  NamedTensor tensor{.name = entry.spec.name,
                     .dtype = entry.spec.dtype,
                     .shape = entry.spec.shape,
                     .bytes = {}};
  int64_t numBytes = entry.end - entry.begin;
  if (entry.isHalf)
    tensor.bytes = widenHalves(bytes, numBytes);
  else
    tensor.bytes.assign(bytes, bytes + numBytes);
  return tensor;
}

/// The header of `tensors` (sorted by name): field order and compact
/// separators as the reference writer's, so a file of one dtype is
/// byte-identical to what PyTorch would write; padded to 8 bytes.
Result<std::string>
formatHeader(const std::map<std::string, std::string> &metadata,
             const std::vector<TensorSpec> &tensors, const std::string &path) {
  std::string header = "{";
  if (!metadata.empty()) {
    header += "\"__metadata__\":{";
    for (const auto &[key, value] : metadata)
      header += (header.back() == '{' ? "" : ",") + jsonString(key) + ":" +
                jsonString(value);
    header += "}";
  }
  int64_t offset = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const TensorSpec &tensor = tensors[i];
    std::optional<int64_t> numBytes =
        byteSize(tensor.shape, dtypeSize(tensor.dtype));
    if (tensor.name.empty() || tensor.name == "__metadata__" ||
        (i > 0 && tensors[i - 1].name == tensor.name))
      return Status::runtimeError("cannot write '" + path + "': tensor name '" +
                                  tensor.name +
                                  "' is empty, reserved or "
                                  "repeated");
    if (!numBytes || offset > INT64_MAX - *numBytes)
      return Status::runtimeError("cannot write '" + path + "': tensor '" +
                                  tensor.name + "' of shape " +
                                  formatCounts(tensor.shape) + " is too large");
    header +=
        (header.back() == '{' ? "" : ",") + jsonString(tensor.name) +
        ":{\"dtype\":\"" + safeTensorsDTypeName(tensor.dtype) +
        "\",\"shape\":" + formatCounts(tensor.shape) +
        ",\"data_offsets\":" + formatCounts({offset, offset + *numBytes}) + "}";
    offset += *numBytes;
  }
  header += "}";
  header.append((8 - header.size() % 8) % 8, ' ');
  return header;
}

bool byName(const TensorSpec &a, const TensorSpec &b) {
  return a.name < b.name;
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
  auto headerBytes =
      readHeaderLength(fileBytes.data(), fileBytes.size(), fileName);
  if (!headerBytes)
    return headerBytes.status();
  std::string_view data = fileBytes.substr(8 + *headerBytes);
  auto header = parseHeader(fileBytes.substr(8, *headerBytes),
                            static_cast<int64_t>(data.size()), fileName);
  if (!header)
    return header.status();
  TensorFile file;
  file.metadata = std::move(header->metadata);
  for (const Entry &entry : header->entries)
    file.tensors.push_back(tensorOf(
        entry, reinterpret_cast<const uint8_t *>(data.data()) + entry.begin));
  return file;
}

Result<std::unique_ptr<SafeTensorsReader>>
SafeTensorsReader::open(const std::string &path) {
  auto file = FileReader::open(path, "");
  if (!file)
    return file.status();
  uint64_t fileSize = static_cast<uint64_t>((*file)->size());
  char lengthBytes[8] = {};
  if (fileSize >= 8)
    SHARC_TRY((*file)->readAt(0, lengthBytes, 8));
  auto headerBytes = readHeaderLength(lengthBytes, fileSize, path);
  if (!headerBytes)
    return headerBytes.status();
  std::string headerText(*headerBytes, '\0');
  SHARC_TRY((*file)->readAt(8, headerText.data(),
                            static_cast<int64_t>(*headerBytes)));
  int64_t dataStart = 8 + static_cast<int64_t>(*headerBytes);
  auto header = parseHeader(headerText, (*file)->size() - dataStart, path);
  if (!header)
    return header.status();
  std::unique_ptr<SafeTensorsReader> reader(new SafeTensorsReader());
  reader->file_ = std::move(*file);
  reader->metadata_ = std::move(header->metadata);
  for (const Entry &entry : header->entries) {
    reader->tensors_.push_back(entry.spec);
    reader->extents_.push_back(
        {dataStart + entry.begin, dataStart + entry.end, entry.isHalf});
  }
  return reader;
}

SafeTensorsReader::~SafeTensorsReader() = default;

const TensorSpec *SafeTensorsReader::find(const std::string &name) const {
  auto it = std::lower_bound(
      tensors_.begin(), tensors_.end(),
      TensorSpec{.name = name, .dtype = DType::F32, .shape = {}}, byName);
  return it != tensors_.end() && it->name == name ? &*it : nullptr;
}

Result<NamedTensor> SafeTensorsReader::read(const std::string &name) const {
  NamedTensor tensor;
  SHARC_TRY(readInto(name, tensor));
  return tensor;
}

Status SafeTensorsReader::readInto(const std::string &name,
                                   NamedTensor &into) const {
  const TensorSpec *spec = find(name);
  if (!spec)
    return Status::invalidInput("no tensor '" + name + "' in the file");
  const Extent &extent = extents_[spec - tensors_.data()];
  int64_t numBytes = extent.end - extent.begin;
  into.name = spec->name;
  into.dtype = spec->dtype;
  into.shape = spec->shape;
  if (!extent.isHalf) {
    resizeForOverwrite(into.bytes, static_cast<size_t>(numBytes));
    return file_->readAt(extent.begin, into.bytes.data(), numBytes);
  }
  std::vector<uint8_t> halves(static_cast<size_t>(numBytes));
  SHARC_TRY(file_->readAt(extent.begin, halves.data(), numBytes));
  into.bytes = widenHalves(halves.data(), numBytes);
  return Status::ok();
}

Result<TensorFile> readSafeTensors(const std::string &path) {
  auto reader = SafeTensorsReader::open(path);
  if (!reader)
    return reader.status();
  TensorFile file;
  file.metadata = (*reader)->metadata();
  for (const TensorSpec &spec : (*reader)->tensors()) {
    auto tensor = (*reader)->read(spec.name);
    if (!tensor)
      return tensor.status();
    file.tensors.push_back(std::move(*tensor));
  }
  return file;
}

Result<std::unique_ptr<SafeTensorsWriter>>
SafeTensorsWriter::create(const std::string &path,
                          const std::map<std::string, std::string> &metadata,
                          std::vector<TensorSpec> tensors) {
  std::sort(tensors.begin(), tensors.end(), byName);
  auto header = formatHeader(metadata, tensors, path);
  if (!header)
    return header.status();
  auto file = AtomicFileWriter::open(path, "");
  if (!file)
    return file.status();
  char length[8];
  for (int i = 0; i < 8; ++i)
    length[i] = static_cast<char>((header->size() >> (8 * i)) & 0xff);
  SHARC_TRY((*file)->append({length, sizeof(length)}));
  SHARC_TRY((*file)->append(*header));
  std::unique_ptr<SafeTensorsWriter> writer(new SafeTensorsWriter());
  writer->path_ = path;
  writer->file_ = std::move(*file);
  writer->order_ = std::move(tensors);
  return writer;
}

SafeTensorsWriter::~SafeTensorsWriter() = default;

Status SafeTensorsWriter::write(const NamedTensor &tensor) {
  auto refuse = [&](const std::string &reason) {
    return Status::runtimeError("cannot write '" + path_ + "': " + reason);
  };
  if (next_ >= order_.size())
    return refuse("tensor '" + tensor.name + "' is not in the header");
  const TensorSpec &spec = order_[next_];
  if (tensor.name != spec.name || tensor.dtype != spec.dtype ||
      tensor.shape != spec.shape)
    return refuse("tensor '" + tensor.name + "' " + dtypeName(tensor.dtype) +
                  " " + formatCounts(tensor.shape) +
                  " comes where the header has '" + spec.name + "' " +
                  dtypeName(spec.dtype) + " " + formatCounts(spec.shape));
  std::optional<int64_t> numBytes =
      byteSize(tensor.shape, dtypeSize(tensor.dtype));
  if (!numBytes || *numBytes != static_cast<int64_t>(tensor.bytes.size()))
    return refuse("tensor '" + tensor.name + "' has " +
                  std::to_string(tensor.bytes.size()) + " bytes for shape " +
                  formatCounts(tensor.shape));
  SHARC_TRY(file_->append({reinterpret_cast<const char *>(tensor.bytes.data()),
                           tensor.bytes.size()}));
  ++next_;
  return Status::ok();
}

Status SafeTensorsWriter::commit() {
  if (next_ != order_.size())
    return Status::runtimeError(
        "cannot write '" + path_ + "': " + std::to_string(next_) + " of " +
        std::to_string(order_.size()) + " tensors written");
  return file_->commit();
}

Status writeSafeTensors(const std::string &path, const TensorFile &file) {
  // The writer checks each tensor's bytes against its shape; one that does
  // not match drops the temporary, leaving whatever was at the path.
  std::vector<const NamedTensor *> order;
  for (const NamedTensor &tensor : file.tensors)
    order.push_back(&tensor);
  std::sort(order.begin(), order.end(),
            [](const NamedTensor *a, const NamedTensor *b) {
              return a->name < b->name;
            });
  std::vector<TensorSpec> specs;
  for (const NamedTensor *tensor : order)
    specs.push_back({tensor->name, tensor->dtype, tensor->shape});
  auto writer = SafeTensorsWriter::create(path, file.metadata, specs);
  if (!writer)
    return writer.status();
  for (const NamedTensor *tensor : order)
    SHARC_TRY((*writer)->write(*tensor));
  return (*writer)->commit();
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
