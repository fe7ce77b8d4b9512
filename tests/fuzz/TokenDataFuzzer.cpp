//===- TokenDataFuzzer.cpp - fuzz the token data reader -------------------===//
//
// The input is a vocabulary size, a batch size and a sequence length (two
// bytes each, little-endian, each at least 1), then the bytes of a token
// file. The reader takes a path, so the bytes go through a temporary file
// of this process. An accepted file must give batches of exactly B*S ids
// in [0, vocab) for any step, including steps far past the file's end.
//
//===----------------------------------------------------------------------===//

#include "executor/DataLoader.h"
#include "tests/fuzz/FuzzCheck.h"

#include <cstdint>
#include <cstdio>
#include <string>
#include <unistd.h>

using namespace sharc;

namespace {

const std::string &tokenPath() {
  static const std::string path =
      "/tmp/sharc-token-fuzz-" + std::to_string(getpid()) + ".bin";
  return path;
}

int64_t readSize(const uint8_t *data) {
  return 1 + (data[0] | (int64_t(data[1]) << 8));
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 6)
    return 0;
  const int64_t vocab = readSize(data), batch = readSize(data + 2) % 16,
                seqLen = readSize(data + 4) % 128;
  if (batch < 1 || seqLen < 1)
    return 0;
  std::FILE *file = std::fopen(tokenPath().c_str(), "wb");
  SHARC_FUZZ_CHECK(file != nullptr, "the temporary file opens");
  if (size > 6)
    std::fwrite(data + 6, 1, size - 6, file);
  std::fclose(file);
  auto loader = exec::DataLoader::fromFile(tokenPath(), vocab, batch, seqLen);
  if (!loader) {
    SHARC_FUZZ_CHECK(loader.status().exitCode() == 2,
                     "a bad token file is bad input");
    return 0;
  }
  for (int64_t step : {int64_t(1), int64_t(2), int64_t(977), int64_t(1) << 30})
    for (int32_t id : loader->batch(step)) {
      SHARC_FUZZ_CHECK(id >= 0 && id < vocab, "every id is in the vocabulary");
    }
  SHARC_FUZZ_CHECK(static_cast<int64_t>(loader->batch(3).size()) ==
                       batch * seqLen,
                   "a batch holds B*S ids");
  return 0;
}
