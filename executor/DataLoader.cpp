//===- DataLoader.cpp - token batches: synthetic or from a file -----------===//

#include "executor/DataLoader.h"

#include "executor/ParamInit.h"
#include "planner/plan/FileText.h"

#include <cstring>
#include <numeric>

namespace sharc::exec {
namespace {

template <typename T> T readLittle(const char *bytes) {
  T value = 0;
  // Little-endian on disk, as is every host sharc runs on.
  std::memcpy(&value, bytes, sizeof(T));
  return value;
}

std::string str(uint64_t value) { return std::to_string(value); }

} // namespace

Result<TokenFileHeader> readTokenFileHeader(const std::string &path,
                                            std::string_view bytes) {
  auto bad = [&](const std::string &message) {
    return Status::invalidInput(path + ": " + message);
  };
  if (static_cast<int64_t>(bytes.size()) < TokenFileHeader::kBytes)
    return bad("token file header is cut short: " + str(bytes.size()) +
               " bytes, the header alone has " + str(TokenFileHeader::kBytes));
  TokenFileHeader header;
  header.version = readLittle<uint32_t>(bytes.data() + 8);
  header.tokenBytes = readLittle<uint32_t>(bytes.data() + 12);
  header.vocabSize = readLittle<uint64_t>(bytes.data() + 16);
  header.count = readLittle<uint64_t>(bytes.data() + 24);
  if (header.version != kTokenFileVersion)
    return bad("token file version " + str(header.version) +
               " is not supported (expected " + str(kTokenFileVersion) + ")");
  if (header.tokenBytes != 2 && header.tokenBytes != 4)
    return bad("token file dtype has " + str(header.tokenBytes) +
               "-byte ids (expected 2 for uint16 or 4 for uint32)");
  // uint16 ids reach 65535; int32 is what the plan's tokens input holds.
  uint64_t maxVocab = header.tokenBytes == 2 ? 65536 : (1ull << 31);
  if (header.vocabSize == 0 || header.vocabSize > maxVocab)
    return bad("token file vocabulary " + str(header.vocabSize) +
               " does not fit its " +
               (header.tokenBytes == 2 ? "uint16" : "uint32") + " ids (1 to " +
               str(maxVocab) + ")");
  uint64_t payload = bytes.size() - TokenFileHeader::kBytes;
  if (header.count == 0 || payload / header.tokenBytes != header.count ||
      payload % header.tokenBytes != 0)
    return bad("token file header counts " + str(header.count) + " ids of " +
               str(header.tokenBytes) + " bytes, but " + str(payload) +
               " bytes follow it");
  return header;
}

DataLoader DataLoader::synthetic(int64_t vocab, int64_t batch, int64_t seqLen,
                                 uint64_t seed) {
  DataLoader loader(vocab, batch, seqLen);
  loader.seed_ = seed;
  return loader;
}

Result<DataLoader> DataLoader::fromFile(const std::string &path, int64_t vocab,
                                        int64_t batch, int64_t seqLen) {
  // Whole, through the shared reader: a directory, FIFO or device is named
  // as such, and a file larger than the host's memory is refused.
  auto text = readWholeFile(path, "token file");
  if (!text)
    return text.status();
  const std::string &bytes = *text;
  if (bytes.empty())
    return Status::invalidInput(path + ": empty token file");
  DataLoader loader(vocab, batch, seqLen);
  bool hasHeader = bytes.size() >= kTokenFileMagic.size() &&
                   std::memcmp(bytes.data(), kTokenFileMagic.data(),
                               kTokenFileMagic.size()) == 0;
  if (hasHeader) {
    auto header = readTokenFileHeader(path, bytes);
    if (!header)
      return header.status();
    // A larger vocabulary means another tokenizer made these ids; a smaller
    // one is a model with padded embeddings, which is fine.
    if (header->vocabSize > static_cast<uint64_t>(vocab))
      return Status::invalidInput(
          path + ": the tokens were made for a vocabulary of " +
          str(header->vocabSize) + " but the plan's model has vocab_size " +
          std::to_string(vocab) +
          " (prepare the data with the model's tokenizer)");
    loader.fileTokens_.resize(header->count);
    const char *ids = bytes.data() + TokenFileHeader::kBytes;
    for (uint64_t i = 0; i < header->count; ++i)
      loader.fileTokens_[i] =
          header->tokenBytes == 2
              ? readLittle<uint16_t>(ids + 2 * i)
              : static_cast<int32_t>(readLittle<uint32_t>(ids + 4 * i));
  } else {
    if (bytes.size() % 4 != 0)
      return Status::invalidInput(
          path + ": " + std::to_string(bytes.size()) +
          " bytes is not a whole number of int32 token ids (and the file "
          "has no sharc token header)");
    loader.fileTokens_.resize(bytes.size() / 4);
    std::memcpy(loader.fileTokens_.data(), bytes.data(), bytes.size());
  }
  if (static_cast<int64_t>(loader.fileTokens_.size()) < seqLen)
    return Status::invalidInput(
        path + ": " + std::to_string(loader.fileTokens_.size()) +
        " tokens, fewer than one sequence of seq_len " +
        std::to_string(seqLen) + " (a window would wrap around the file)");
  for (size_t i = 0; i < loader.fileTokens_.size(); ++i) {
    int32_t id = loader.fileTokens_[i];
    if (id < 0 || id >= vocab)
      return Status::invalidInput(
          path + ": token " + std::to_string(i) + " is " + std::to_string(id) +
          ", outside the vocabulary [0, " + std::to_string(vocab) + ")");
  }
  return loader;
}

int64_t DataLoader::numWindows() const {
  if (fileTokens_.empty() || seqLen_ <= 0)
    return 0;
  int64_t whole = static_cast<int64_t>(fileTokens_.size()) / seqLen_;
  return whole > 0 ? whole : 1;
}

void DataLoader::setShuffle(bool shuffle) {
  stride_ = 0;
  int64_t count = numWindows();
  if (!shuffle || count <= 1)
    return;
  // The golden ratio spreads consecutive multiples evenly over [0, N).
  int64_t golden = static_cast<int64_t>(0.6180339887498949 * count + 0.5);
  for (int64_t delta = 0; delta < count; ++delta)
    for (int64_t candidate : {golden - delta, golden + delta})
      if (candidate >= 1 && candidate < count &&
          std::gcd(candidate, count) == 1) {
        stride_ = candidate;
        return;
      }
}

DataOrder DataLoader::order() const {
  return stride_ > 0 ? DataOrder{stride_, numWindows()} : DataOrder{};
}

Status DataLoader::setOrder(const DataOrder &order) {
  if (order.stride == 0) {
    stride_ = 0;
    return Status::ok();
  }
  int64_t count = numWindows();
  if (order.numWindows != count)
    return Status::invalidInput(
        "the run was shuffled over " + std::to_string(order.numWindows) +
        " windows of " + std::to_string(seqLen_) + " tokens, but the data " +
        "holds " + std::to_string(count) + " (another file?)");
  if (order.stride < 1 || order.stride >= count ||
      std::gcd(order.stride, count) != 1)
    return Status::invalidInput(
        "shuffle stride " + std::to_string(order.stride) + " is not in [1, " +
        std::to_string(count) + ") and coprime to " + std::to_string(count));
  stride_ = order.stride;
  return Status::ok();
}

std::vector<int32_t> DataLoader::batch(int64_t step) const {
  return batchAt((step - 1) * batch_);
}

std::vector<int32_t> DataLoader::batchAt(int64_t firstWindow) const {
  std::vector<int32_t> tokens(static_cast<size_t>(batch_ * seqLen_));
  if (fileTokens_.empty()) {
    if (vocab_ <= 0)
      return tokens; // no vocabulary: all zeros rather than a division by 0
    // Synthetic ids are drawn per step, so that runs from before the data
    // position existed draw the same batches.
    int64_t step = batch_ > 0 ? firstWindow / batch_ + 1 : 1;
    uint64_t key = splitmix64(splitmix64(seed_) + static_cast<uint64_t>(step));
    for (size_t i = 0; i < tokens.size(); ++i)
      tokens[i] = static_cast<int32_t>(splitmix64(key + i) %
                                       static_cast<uint64_t>(vocab_));
    return tokens;
  }
  uint64_t numTokens = fileTokens_.size();
  for (int64_t b = 0; b < batch_; ++b) {
    uint64_t window = static_cast<uint64_t>(firstWindow + b);
    if (stride_ > 0) {
      uint64_t count = static_cast<uint64_t>(numWindows());
      window =
          static_cast<uint64_t>(static_cast<unsigned __int128>(window % count) *
                                static_cast<uint64_t>(stride_) % count);
    }
    // In 128 bits: both factors reach the file's length.
    uint64_t start = static_cast<uint64_t>(
        static_cast<unsigned __int128>(window % numTokens) *
        (static_cast<uint64_t>(seqLen_) % numTokens) % numTokens);
    for (int64_t s = 0; s < seqLen_; ++s)
      tokens[b * seqLen_ + s] = fileTokens_[(start + s) % numTokens];
  }
  return tokens;
}

} // namespace sharc::exec
