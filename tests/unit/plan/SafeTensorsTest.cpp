//===- SafeTensorsTest.cpp - safetensors round trip and validation --------===//

#include "planner/plan/SafeTensors.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

using namespace sharc;
using namespace sharc::plan;
using Catch::Matchers::StartsWith;

namespace {

template <typename T> std::string rawBytes(const std::vector<T> &values) {
  std::string bytes(values.size() * sizeof(T), '\0');
  if (!values.empty())
    std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

template <typename T>
NamedTensor makeTensor(std::string name, DType dtype,
                       std::vector<int64_t> shape,
                       const std::vector<T> &values) {
  std::string bytes = rawBytes(values);
  return {std::move(name), dtype, std::move(shape),
          ByteVector(bytes.begin(), bytes.end())};
}

/// A whole file: the 8-byte little-endian header length, header, data.
std::string fileBytes(const std::string &header, const std::string &data) {
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i)
    bytes[i] = static_cast<char>((uint64_t(header.size()) >> (8 * i)) & 0xff);
  return bytes + header + data;
}

std::string readWholeFile(const std::string &path) {
  std::ifstream stream(path, std::ios::binary);
  std::ostringstream bytes;
  bytes << stream.rdbuf();
  return bytes.str();
}

std::string parseError(const std::string &bytes) {
  Result<TensorFile> result = parseSafeTensors(bytes, "t.safetensors");
  REQUIRE_FALSE(result.isOk());
  REQUIRE(result.status().exitCode() == 2);
  return result.status().message();
}

const std::string kTensorPath = SHARC_BINARY_DIR "/SafeTensorsTest.safetensors";

/// Files named "<path>.<anything>" beside `path`: writers' temporaries.
int temporariesBeside(const std::string &path) {
  std::filesystem::path target(path);
  std::string prefix = target.filename().string() + ".";
  int count = 0;
  for (const auto &entry :
       std::filesystem::directory_iterator(target.parent_path()))
    count += entry.path().filename().string().rfind(prefix, 0) == 0;
  return count;
}

} // namespace

TEST_CASE("tensors of every dtype and the metadata round trip", "[plan]") {
  std::vector<uint16_t> bf16Bits = {floatToBf16(1.5f), floatToBf16(-2.0f),
                                    floatToBf16(0.0078125f)};
  TensorFile file;
  file.tensors = {
      makeTensor<float>("w", DType::F32, {2, 3},
                        {1.0f, -2.5f, 3.25f, 0.0f, 1e-3f, -7.0f}),
      makeTensor<uint16_t>("b", DType::BF16, {3}, bf16Bits),
      makeTensor<int32_t>("tokens", DType::I32, {2, 2}, {0, -1, 2147483647, 7}),
      makeTensor<double>("loss", DType::F64, {}, {0.1}),
      makeTensor<float>("empty", DType::F32, {0, 3}, {}),
  };
  file.metadata = {{"format", "pt"}, {"step", "12"}, {"odd \"key\"", "a\nb"}};
  REQUIRE(writeSafeTensors(kTensorPath, file).isOk());

  Result<TensorFile> read = readSafeTensors(kTensorPath);
  INFO(read.status().message());
  REQUIRE(read.isOk());
  REQUIRE(read->metadata == file.metadata);
  std::vector<std::string> names;
  for (const NamedTensor &tensor : read->tensors)
    names.push_back(tensor.name);
  REQUIRE(names ==
          std::vector<std::string>{"b", "empty", "loss", "tokens", "w"});
  for (const NamedTensor &original : file.tensors) {
    const NamedTensor *tensor = read->find(original.name);
    REQUIRE(tensor != nullptr);
    REQUIRE(tensor->dtype == original.dtype);
    REQUIRE(tensor->shape == original.shape);
    REQUIRE(tensor->bytes == original.bytes);
  }
  REQUIRE(read->find("missing") == nullptr);
  REQUIRE(tensorAsDoubles(*read->find("w")) ==
          std::vector<double>{1.0, -2.5, 3.25, 0.0, double(1e-3f), -7.0});
  REQUIRE(tensorAsDoubles(*read->find("b")) ==
          std::vector<double>{1.5, -2.0, 0.0078125});
  REQUIRE(tensorAsDoubles(*read->find("tokens")) ==
          std::vector<double>{0, -1, 2147483647, 7});
  REQUIRE(tensorAsDoubles(*read->find("loss")) == std::vector<double>{0.1});
  REQUIRE(tensorAsDoubles(*read->find("empty")).empty());
  std::remove(kTensorPath.c_str());
}

TEST_CASE("the writer lays out bytes as the reference writer does", "[plan]") {
  // What Python's safetensors.numpy.save({"a": arange(2, float32),
  // "b": arange(1, float32)}, metadata={"format": "pt"}) returns.
  std::string header =
      "{\"__metadata__\":{\"format\":\"pt\"},"
      "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
      "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}     ";
  REQUIRE(header.size() == 144);
  std::string expected =
      fileBytes(header, rawBytes<float>({0.0f, 1.0f}) + rawBytes<float>({0}));

  TensorFile file;
  file.tensors = {makeTensor<float>("b", DType::F32, {1}, {0.0f}),
                  makeTensor<float>("a", DType::F32, {2}, {0.0f, 1.0f})};
  file.metadata = {{"format", "pt"}};
  REQUIRE(writeSafeTensors(kTensorPath, file).isOk());
  REQUIRE(readWholeFile(kTensorPath) == expected);
  std::remove(kTensorPath.c_str());
}

TEST_CASE("a file in PyTorch's layout reads with its values", "[plan]") {
  // Python orders tensors by dtype size, then name, and pads the header with
  // spaces to a multiple of 8: this header is what it wrote for
  // {"w": arange(4, f32).reshape(2, 2), "b": [1, 2, 3] f64, "a": 5 i32}.
  std::string header =
      "{\"__metadata__\":{\"format\":\"pt\"},"
      "\"b\":{\"dtype\":\"F64\",\"shape\":[3],\"data_offsets\":[0,24]},"
      "\"w\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[24,40]},"
      "\"a\":{\"dtype\":\"I32\",\"shape\":[],\"data_offsets\":[40,44]}}   ";
  REQUIRE(header.size() % 8 == 0);
  std::string data = rawBytes<double>({1, 2, 3}) +
                     rawBytes<float>({0, 1, 2, 3}) + rawBytes<int32_t>({5});
  Result<TensorFile> file =
      parseSafeTensors(fileBytes(header, data), "py.safetensors");
  INFO(file.status().message());
  REQUIRE(file.isOk());
  REQUIRE(file->metadata.at("format") == "pt");
  REQUIRE(file->tensors.size() == 3);
  REQUIRE(file->tensors[0].name == "a");
  REQUIRE(file->tensors[0].shape.empty());
  REQUIRE(tensorAsDoubles(file->tensors[0]) == std::vector<double>{5});
  REQUIRE(file->tensors[1].name == "b");
  REQUIRE(file->tensors[1].dtype == DType::F64);
  REQUIRE(tensorAsDoubles(file->tensors[1]) == std::vector<double>{1, 2, 3});
  REQUIRE(file->tensors[2].name == "w");
  REQUIRE(file->tensors[2].shape == std::vector<int64_t>{2, 2});
  REQUIRE(tensorAsDoubles(file->tensors[2]) == std::vector<double>{0, 1, 2, 3});
}

TEST_CASE("F16 tensors are widened to F32 exactly", "[plan]") {
  // IEEE binary16 patterns and their values by the format's definition:
  // one, minus two, the smallest and the largest subnormal (2^-24 and
  // 1023 * 2^-24), the largest finite (65504), 1/3 rounded to half
  // (0x3555 = 1365/4096), minus zero and infinity; beside an F32 tensor,
  // so the offsets after the halves are checked too.
  std::string header =
      "{\"h\":{\"dtype\":\"F16\",\"shape\":[2,4],\"data_offsets\":[0,16]},"
      "\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[16,24]}}";
  std::string data = rawBytes<uint16_t>({0x3c00, 0xc000, 0x0001, 0x03ff, 0x7bff,
                                         0x3555, 0x8000, 0x7c00}) +
                     rawBytes<float>({1.5f, -4.0f});
  Result<TensorFile> file =
      parseSafeTensors(fileBytes(header, data), "half.safetensors");
  INFO(file.status().message());
  REQUIRE(file.isOk());
  const NamedTensor *halves = file->find("h");
  REQUIRE(halves);
  REQUIRE(halves->dtype == DType::F32);
  REQUIRE(halves->shape == std::vector<int64_t>{2, 4});
  std::vector<double> values = tensorAsDoubles(*halves);
  std::vector<double> expected = {1.0,
                                  -2.0,
                                  std::ldexp(1.0, -24),
                                  std::ldexp(1023.0, -24),
                                  65504.0,
                                  1365.0 / 4096.0,
                                  -0.0,
                                  INFINITY};
  REQUIRE(values == expected);
  REQUIRE(std::signbit(values[6]));
  REQUIRE(tensorAsDoubles(*file->find("w")) == std::vector<double>{1.5, -4});
  // A half NaN stays a NaN.
  std::string nanHeader =
      "{\"n\":{\"dtype\":\"F16\",\"shape\":[1],\"data_offsets\":[0,2]}}";
  Result<TensorFile> nan =
      parseSafeTensors(fileBytes(nanHeader, rawBytes<uint16_t>({0x7e00})), "n");
  REQUIRE(nan.isOk());
  REQUIRE(std::isnan(tensorAsDoubles(nan->tensors[0])[0]));
  // A half tensor needs 2 bytes per element.
  std::string shortHeader =
      "{\"h\":{\"dtype\":\"F16\",\"shape\":[3],\"data_offsets\":[0,4]}}";
  Result<TensorFile> wrong =
      parseSafeTensors(fileBytes(shortHeader, rawBytes<uint16_t>({0, 0})), "s");
  REQUIRE(!wrong.isOk());
  REQUIRE(wrong.status().message() ==
          "s: tensor 'h': shape [3] of F16 needs 6 bytes, but data_offsets "
          "[0,4] hold 4");
}

TEST_CASE("malformed files are rejected with a clear message", "[plan]") {
  const std::string tensorA =
      "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}";
  const std::string eightBytes = rawBytes<float>({1, 2});
  REQUIRE(parseSafeTensors(fileBytes("{" + tensorA + "}", eightBytes), "ok")
              .isOk());

  SECTION("shorter than the header length") {
    REQUIRE(parseError("abc") ==
            "t.safetensors: file is 3 bytes, too short for the 8-byte header "
            "length");
  }
  SECTION("header length beyond the file") {
    std::string bytes = fileBytes("{" + tensorA + "}", eightBytes);
    bytes[0] = static_cast<char>(0xf0);
    REQUIRE(parseError(bytes) == "t.safetensors: header length 240 exceeds "
                                 "the 62 bytes after it (truncated file?)");
    bytes[5] = 1;
    REQUIRE_THAT(parseError(bytes),
                 StartsWith("t.safetensors: header length 1099511628016 "
                            "exceeds the limit"));
  }
  SECTION("header not JSON") {
    REQUIRE_THAT(parseError(fileBytes("{\"a\": [1, ", "")),
                 StartsWith("t.safetensors: header is not valid JSON: "));
    REQUIRE(parseError(fileBytes("[1, 2]  ", "")) ==
            "t.safetensors: header must be a JSON object starting with '{'");
  }
  SECTION("offsets beyond the data (truncated data)") {
    REQUIRE(parseError(fileBytes("{" + tensorA + "}", eightBytes.substr(4))) ==
            "t.safetensors: tensor 'a': data_offsets [0,8] run past the end "
            "of the data (4 bytes)");
  }
  SECTION("overlapping tensors") {
    std::string header =
        "{" + tensorA +
        ",\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}";
    REQUIRE(parseError(fileBytes(header, eightBytes)) ==
            "t.safetensors: tensors 'a' [0,8] and 'b' [4,8] overlap");
  }
  SECTION("unsupported dtype") {
    std::string header =
        "{\"h\":{\"dtype\":\"F8_E4M3\",\"shape\":[8],\"data_offsets\":"
        "[0,8]}}";
    REQUIRE(parseError(fileBytes(header, eightBytes)) ==
            "t.safetensors: tensor 'h': unsupported dtype 'F8_E4M3' (sharc "
            "reads F32, BF16, F16 as F32, I32 and F64)");
  }
  SECTION("shape does not match the byte count") {
    std::string header =
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}";
    REQUIRE(parseError(fileBytes(header, eightBytes)) ==
            "t.safetensors: tensor 'a': shape [3] of F32 needs 12 bytes, but "
            "data_offsets [0,8] hold 8");
  }
  SECTION("reversed offsets and negative shapes") {
    std::string reversed =
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,0]}}";
    REQUIRE(parseError(fileBytes(reversed, eightBytes)) ==
            "t.safetensors: tensor 'a': data_offsets must be [begin, end] "
            "with begin <= end");
    std::string negative =
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}";
    REQUIRE(parseError(fileBytes(negative, eightBytes)) ==
            "t.safetensors: tensor 'a': shape must be a list of non-negative "
            "integers");
  }
  SECTION("a missing key (yaml-cpp threw on the lookup)") {
    const std::pair<const char *, const char *> cases[] = {
        {"dtype", "{\"a\":{\"shape\":[2],\"data_offsets\":[0,8]}}"},
        {"shape", "{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,8]}}"},
        {"data_offsets", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2]}}"}};
    for (const auto &[key, header] : cases)
      REQUIRE(parseError(fileBytes(header, eightBytes)) ==
              std::string("t.safetensors: tensor 'a': missing key '") + key +
                  "'");
  }
  SECTION("duplicate names and bad metadata") {
    REQUIRE(parseError(
                fileBytes("{" + tensorA + "," + tensorA + "}", eightBytes)) ==
            "t.safetensors: duplicate key 'a' in the header");
    REQUIRE(parseError(fileBytes("{\"__metadata__\":{\"k\":[1]}}", "")) ==
            "t.safetensors: __metadata__ must map strings to strings");
  }
  SECTION("missing file") {
    Result<TensorFile> missing = readSafeTensors("/nonexistent/x.safetensors");
    REQUIRE_FALSE(missing.isOk());
    REQUIRE_THAT(missing.status().message(),
                 StartsWith("cannot open '/nonexistent/x.safetensors'"));
  }
}

TEST_CASE("every truncation of a file is rejected without a crash", "[plan]") {
  TensorFile file;
  file.tensors = {makeTensor<float>("w", DType::F32, {3}, {1, 2, 3}),
                  makeTensor<int32_t>("i", DType::I32, {1}, {4})};
  file.metadata = {{"format", "pt"}};
  REQUIRE(writeSafeTensors(kTensorPath, file).isOk());
  std::string bytes = readWholeFile(kTensorPath);
  std::remove(kTensorPath.c_str());
  REQUIRE(parseSafeTensors(bytes, "whole").isOk());
  // The data ends exactly at the last tensor, so every shorter prefix loses
  // bytes that some tensor needs.
  for (size_t length = 0; length < bytes.size(); ++length)
    REQUIRE_FALSE(parseSafeTensors(bytes.substr(0, length), "cut").isOk());
}

TEST_CASE("the writer refuses tensors that do not match their shape",
          "[plan]") {
  TensorFile file;
  file.tensors = {makeTensor<float>("w", DType::F32, {3}, {1, 2})};
  Status status = writeSafeTensors(kTensorPath, file);
  REQUIRE_FALSE(status.isOk());
  REQUIRE(status.message() == "cannot write '" + kTensorPath +
                                  "': tensor 'w' has 8 bytes for shape [3]");
  file.tensors = {makeTensor<float>("w", DType::F32, {1}, {1}),
                  makeTensor<float>("w", DType::F32, {1}, {2})};
  REQUIRE_FALSE(writeSafeTensors(kTensorPath, file).isOk());
}

TEST_CASE("the reader takes one tensor at a time from the file", "[plan]") {
  TensorFile file;
  file.tensors = {makeTensor<float>("w", DType::F32, {2, 2}, {1, 2, 3, 4}),
                  makeTensor<int32_t>("a", DType::I32, {3}, {7, 8, 9})};
  file.metadata = {{"step", "3"}};
  REQUIRE(writeSafeTensors(kTensorPath, file));
  auto reader = SafeTensorsReader::open(kTensorPath);
  REQUIRE(reader);
  REQUIRE((*reader)->metadata() == file.metadata);
  REQUIRE((*reader)->tensors().size() == 2);
  REQUIRE((*reader)->tensors()[0].name == "a");
  REQUIRE((*reader)->tensors()[1].shape == std::vector<int64_t>{2, 2});
  REQUIRE((*reader)->find("nothing") == nullptr);
  // Read in any order, each its own bytes.
  auto w = (*reader)->read("w");
  REQUIRE(w);
  REQUIRE(w->bytes == file.tensors[0].bytes);
  REQUIRE(w->dtype == DType::F32);
  auto a = (*reader)->read("a");
  REQUIRE(a);
  REQUIRE(a->bytes == file.tensors[1].bytes);
  // Into one tensor, larger then smaller: each read is whole.
  NamedTensor into;
  REQUIRE((*reader)->readInto("w", into));
  REQUIRE((*reader)->readInto("a", into));
  REQUIRE(into.name == "a");
  REQUIRE(into.dtype == DType::I32);
  REQUIRE(into.shape == std::vector<int64_t>{3});
  REQUIRE(into.bytes == file.tensors[1].bytes);
  auto missing = (*reader)->read("nothing");
  REQUIRE_FALSE(missing);
  REQUIRE(missing.status().message() == "no tensor 'nothing' in the file");
  std::remove(kTensorPath.c_str());
}

TEST_CASE("the reader refuses every truncation of a file on disk", "[plan]") {
  TensorFile file;
  file.tensors = {makeTensor<float>("w", DType::F32, {3}, {1, 2, 3}),
                  makeTensor<int32_t>("i", DType::I32, {1}, {4})};
  REQUIRE(writeSafeTensors(kTensorPath, file));
  std::string bytes = readWholeFile(kTensorPath);
  for (size_t length = 0; length < bytes.size(); ++length) {
    std::ofstream(kTensorPath, std::ios::binary | std::ios::trunc)
        << bytes.substr(0, length);
    auto reader = SafeTensorsReader::open(kTensorPath);
    REQUIRE_FALSE(reader);
    REQUIRE_THAT(reader.status().message(), StartsWith(kTensorPath + ": "));
  }
  std::remove(kTensorPath.c_str());
}

TEST_CASE("the streaming writer's file equals the whole-file writer's",
          "[plan]") {
  TensorFile file;
  file.tensors = {makeTensor<float>("z", DType::F32, {2}, {1.5f, -2}),
                  makeTensor<uint16_t>("b", DType::BF16, {3}, {1, 2, 3}),
                  makeTensor<double>("d", DType::F64, {}, {0.25})};
  file.metadata = {{"format", "sharc-checkpoint"}, {"step", "9"}};
  REQUIRE(writeSafeTensors(kTensorPath, file));
  std::string whole = readWholeFile(kTensorPath);
  std::remove(kTensorPath.c_str());

  std::vector<TensorSpec> specs;
  for (const NamedTensor &tensor : file.tensors)
    specs.push_back({tensor.name, tensor.dtype, tensor.shape});
  auto writer = SafeTensorsWriter::create(kTensorPath, file.metadata, specs);
  REQUIRE(writer);
  std::vector<std::string> order;
  for (const TensorSpec &spec : (*writer)->order())
    order.push_back(spec.name);
  REQUIRE(order == std::vector<std::string>{"b", "d", "z"});
  // Nothing is at the path until the last tensor is in and committed.
  REQUIRE((*writer)->write(file.tensors[1]));
  REQUIRE(std::ifstream(kTensorPath).fail());
  Status early = (*writer)->commit();
  REQUIRE_FALSE(early);
  REQUIRE(early.message() ==
          "cannot write '" + kTensorPath + "': 1 of 3 tensors written");
  REQUIRE(std::ifstream(kTensorPath).fail());
  REQUIRE((*writer)->write(file.tensors[2]));
  REQUIRE((*writer)->write(file.tensors[0]));
  REQUIRE((*writer)->commit());
  REQUIRE(readWholeFile(kTensorPath) == whole);
  REQUIRE(temporariesBeside(kTensorPath) == 0);
  std::remove(kTensorPath.c_str());
}

TEST_CASE("the streaming writer takes tensors in its order, whole", "[plan]") {
  std::vector<TensorSpec> specs = {{"a", DType::F32, {2}},
                                   {"b", DType::F32, {1}}};
  NamedTensor a = makeTensor<float>("a", DType::F32, {2}, {1, 2});
  NamedTensor b = makeTensor<float>("b", DType::F32, {1}, {3});
  {
    auto writer = SafeTensorsWriter::create(kTensorPath, {}, specs);
    REQUIRE(writer);
    Status outOfOrder = (*writer)->write(b);
    REQUIRE_FALSE(outOfOrder);
    REQUIRE(outOfOrder.message() ==
            "cannot write '" + kTensorPath +
                "': tensor 'b' f32 [1] comes where the header has 'a' f32 [2]");
    NamedTensor short_ = a;
    short_.bytes.resize(4);
    Status shortBytes = (*writer)->write(short_);
    REQUIRE_FALSE(shortBytes);
    REQUIRE(shortBytes.message() ==
            "cannot write '" + kTensorPath +
                "': tensor 'a' has 4 bytes for shape [2]");
    REQUIRE(temporariesBeside(kTensorPath) == 1);
    // Dropped without commit: no file, and no temporary beside it.
  }
  REQUIRE(std::ifstream(kTensorPath).fail());
  REQUIRE(temporariesBeside(kTensorPath) == 0);
  auto writer = SafeTensorsWriter::create(kTensorPath, {}, specs);
  REQUIRE(writer);
  REQUIRE((*writer)->write(a));
  REQUIRE((*writer)->write(b));
  Status extra = (*writer)->write(b);
  REQUIRE_FALSE(extra);
  REQUIRE(extra.message() == "cannot write '" + kTensorPath +
                                 "': tensor 'b' is not in the header");
  REQUIRE((*writer)->commit());
  auto read = readSafeTensors(kTensorPath);
  REQUIRE(read);
  REQUIRE(read->tensors[0].bytes == a.bytes);
  REQUIRE(read->tensors[1].bytes == b.bytes);
  std::remove(kTensorPath.c_str());
}
