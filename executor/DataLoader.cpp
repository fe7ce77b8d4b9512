//===- DataLoader.cpp - token batches: synthetic or from a file -----------===//

#include "executor/DataLoader.h"

#include "executor/ParamInit.h"

#include <cstring>
#include <fstream>
#include <iterator>

namespace sharc::exec {

DataLoader DataLoader::synthetic(int64_t vocab, int64_t batch, int64_t seqLen,
                                 uint64_t seed) {
  DataLoader loader(vocab, batch, seqLen);
  loader.seed_ = seed;
  return loader;
}

Result<DataLoader> DataLoader::fromFile(const std::string &path, int64_t vocab,
                                        int64_t batch, int64_t seqLen) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return Status::invalidInput(path + ": cannot open token file");
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)),
                          std::istreambuf_iterator<char>());
  if (bytes.empty())
    return Status::invalidInput(path + ": empty token file");
  if (bytes.size() % 4 != 0)
    return Status::invalidInput(
        path + ": " + std::to_string(bytes.size()) +
        " bytes is not a whole number of int32 token ids");
  DataLoader loader(vocab, batch, seqLen);
  loader.fileTokens_.resize(bytes.size() / 4);
  // The file is little-endian, as is every host sharc runs on.
  std::memcpy(loader.fileTokens_.data(), bytes.data(), bytes.size());
  for (size_t i = 0; i < loader.fileTokens_.size(); ++i) {
    int32_t id = loader.fileTokens_[i];
    if (id < 0 || id >= vocab)
      return Status::invalidInput(
          path + ": token " + std::to_string(i) + " is " + std::to_string(id) +
          ", outside the vocabulary [0, " + std::to_string(vocab) + ")");
  }
  return loader;
}

std::vector<int32_t> DataLoader::batch(int64_t step) const {
  std::vector<int32_t> tokens(static_cast<size_t>(batch_ * seqLen_));
  if (fileTokens_.empty()) {
    if (vocab_ <= 0)
      return tokens; // no vocabulary: all zeros rather than a division by 0
    uint64_t key = splitmix64(splitmix64(seed_) + static_cast<uint64_t>(step));
    for (size_t i = 0; i < tokens.size(); ++i)
      tokens[i] = static_cast<int32_t>(splitmix64(key + i) %
                                       static_cast<uint64_t>(vocab_));
    return tokens;
  }
  int64_t numTokens = static_cast<int64_t>(fileTokens_.size());
  for (int64_t b = 0; b < batch_; ++b) {
    int64_t window = (step - 1) * batch_ + b;
    int64_t start = (window % numTokens) * (seqLen_ % numTokens) % numTokens;
    for (int64_t s = 0; s < seqLen_; ++s)
      tokens[b * seqLen_ + s] = fileTokens_[(start + s) % numTokens];
  }
  return tokens;
}

} // namespace sharc::exec
