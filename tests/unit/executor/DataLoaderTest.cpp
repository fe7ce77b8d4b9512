//===- DataLoaderTest.cpp - token batches, checkpoints, metrics -----------===//

#include "executor/DataLoader.h"
#include "executor/Checkpoint.h"
#include "executor/Metrics.h"

#include "TestPlans.h"

#include <catch2/catch.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <unistd.h>

using namespace sharc;
using namespace sharc::exec;
using namespace sharc::exec::test;

namespace {
/// A file path in the temporary directory, removed at scope exit.
struct TempPath {
  std::string path;
  explicit TempPath(const std::string &stem)
      : path("/tmp/sharc-executor-test-" + std::to_string(::getpid()) + "-" +
             stem) {}
  ~TempPath() { std::remove(path.c_str()); }
};

void writeInts(const std::string &path, const std::vector<int32_t> &ids) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char *>(ids.data()),
            static_cast<std::streamsize>(ids.size() * 4));
}
} // namespace

TEST_CASE("synthetic batches are reproducible and differ per step",
          "[executor]") {
  DataLoader loader = DataLoader::synthetic(50, 3, 4, 42);
  std::vector<int32_t> first = loader.batch(1);
  REQUIRE(first.size() == 12);
  REQUIRE(first == DataLoader::synthetic(50, 3, 4, 42).batch(1));
  REQUIRE(first != loader.batch(2));
  REQUIRE(first != DataLoader::synthetic(50, 3, 4, 43).batch(1));
  std::set<int32_t> seen;
  for (int64_t step = 1; step <= 100; ++step)
    for (int32_t id : loader.batch(step)) {
      REQUIRE(id >= 0);
      REQUIRE(id < 50);
      seen.insert(id);
    }
  REQUIRE(seen.size() == 50); // 1200 draws cover all 50 ids
}

TEST_CASE("a token file is read in windows of S tokens, wrapping",
          "[executor]") {
  TempPath file("tokens.bin");
  writeInts(file.path, {0, 1, 2, 3, 4, 5, 6});
  auto loader = DataLoader::fromFile(file.path, 10, 2, 3);
  INFO(loader.status().message());
  REQUIRE(loader);
  // Step 1: windows 0 and 1 = tokens [0,3) and [3,6).
  REQUIRE(loader->batch(1) == std::vector<int32_t>{0, 1, 2, 3, 4, 5});
  // Step 2: windows 2 and 3 start at 6 and 9 mod 7 = 2.
  REQUIRE(loader->batch(2) == std::vector<int32_t>{6, 0, 1, 2, 3, 4});

  writeInts(file.path, {0, 1, 12, 3});
  auto outOfVocab = DataLoader::fromFile(file.path, 10, 2, 3);
  REQUIRE(outOfVocab.status().code() == Status::Code::InvalidInput);
  REQUIRE(outOfVocab.status().message().find("token 2 is 12") !=
          std::string::npos);

  std::ofstream(file.path, std::ios::binary) << "abcdef";
  auto ragged = DataLoader::fromFile(file.path, 10, 2, 3);
  REQUIRE(ragged.status().code() == Status::Code::InvalidInput);
  auto missing = DataLoader::fromFile(file.path + ".none", 10, 2, 3);
  REQUIRE(missing.status().code() == Status::Code::InvalidInput);

  // Shorter than one sequence: an error, not a window wrapping around.
  writeInts(file.path, {0, 1});
  auto shortFile = DataLoader::fromFile(file.path, 10, 2, 3);
  REQUIRE(shortFile.status().code() == Status::Code::InvalidInput);
  REQUIRE(shortFile.status().message().find(
              "2 tokens, fewer than one sequence of seq_len 3") !=
          std::string::npos);
  // A directory is named as one.
  auto folder = DataLoader::fromFile(
      std::filesystem::temp_directory_path().string(), 10, 2, 3);
  REQUIRE(folder.status().code() == Status::Code::InvalidInput);
  REQUIRE(folder.status().message().find("directory") != std::string::npos);
}

namespace {
/// A sharc token file written byte by byte, apart from the reader's code.
void writeTokenFile(const std::string &path, uint32_t version, uint32_t width,
                    uint64_t vocab, uint64_t count,
                    const std::vector<uint32_t> &ids) {
  std::ofstream out(path, std::ios::binary);
  out.write("SHARCTOK", 8);
  auto put = [&](uint64_t value, int bytes) {
    for (int i = 0; i < bytes; ++i)
      out.put(static_cast<char>((value >> (8 * i)) & 0xff));
  };
  put(version, 4);
  put(width, 4);
  put(vocab, 8);
  put(count, 8);
  for (uint32_t id : ids)
    put(id, static_cast<int>(width));
}

std::string messageOf(const Result<DataLoader> &loader) {
  return loader ? std::string("(accepted)") : loader.status().message();
}
} // namespace

TEST_CASE("a token file with a header is read as uint16 or uint32 ids",
          "[executor]") {
  TempPath file("header.tokens");
  writeTokenFile(file.path, 1, 2, 300, 5, {299, 1, 2, 3, 4});
  auto narrow = DataLoader::fromFile(file.path, 300, 1, 5);
  INFO(messageOf(narrow));
  REQUIRE(narrow);
  REQUIRE(narrow->batch(1) == std::vector<int32_t>{299, 1, 2, 3, 4});
  // A model with a padded vocabulary reads ids of a smaller tokenizer.
  writeTokenFile(file.path, 1, 4, 70000, 3, {69999, 0, 7});
  auto wide = DataLoader::fromFile(file.path, 70016, 2, 2);
  INFO(messageOf(wide));
  REQUIRE(wide);
  REQUIRE(wide->numWindows() == 1);
  // Windows 0 and 1 start at tokens 0 and 2; the data position 1 is step
  // 1 shifted by one window.
  REQUIRE(wide->batch(1) == std::vector<int32_t>{69999, 0, 7, 69999});
  REQUIRE(wide->batchAt(1) == std::vector<int32_t>{7, 69999, 0, 7});
}

TEST_CASE("a token file header that does not fit the plan is refused",
          "[executor]") {
  TempPath file("bad.tokens");
  auto refusal = [&](uint32_t version, uint32_t width, uint64_t vocab,
                     uint64_t count, std::vector<uint32_t> ids,
                     int64_t planVocab = 300) {
    writeTokenFile(file.path, version, width, vocab, count, ids);
    auto loader = DataLoader::fromFile(file.path, planVocab, 1, 2);
    REQUIRE(!loader);
    REQUIRE(loader.status().exitCode() == 2);
    return loader.status().message();
  };
  REQUIRE(refusal(1, 2, 6400, 2, {1, 2}) ==
          file.path + ": the tokens were made for a vocabulary of 6400 but "
                      "the plan's model has vocab_size 300 (prepare the data "
                      "with the model's tokenizer)");
  REQUIRE(refusal(2, 2, 300, 2, {1, 2}) ==
          file.path + ": token file version 2 is not supported (expected 1)");
  REQUIRE(refusal(1, 3, 300, 2, {1, 2}) ==
          file.path + ": token file dtype has 3-byte ids (expected 2 for "
                      "uint16 or 4 for uint32)");
  REQUIRE(refusal(1, 2, 70000, 2, {1, 2}, 80000) ==
          file.path + ": token file vocabulary 70000 does not fit its uint16 "
                      "ids (1 to 65536)");
  REQUIRE(refusal(1, 2, 300, 3, {1, 2}) ==
          file.path + ": token file header counts 3 ids of 2 bytes, but 4 "
                      "bytes follow it");
  REQUIRE(refusal(1, 2, 300, 2, {1, 300}) ==
          file.path + ": token 1 is 300, outside the vocabulary [0, 300)");
  std::ofstream(file.path, std::ios::binary) << "SHARCTOK\x01";
  auto cut = DataLoader::fromFile(file.path, 300, 1, 2);
  REQUIRE(cut.status().message() ==
          file.path + ": token file header is cut short: 9 bytes, the header "
                      "alone has 32");
}

TEST_CASE("a checkpoint resumes params, optimizer state and step count",
          "[executor]") {
  LinearModel model;
  TempPath checkpoint("ckpt.safetensors");
  DataLoader data =
      DataLoader::synthetic(model.vocab, model.batch, model.seqLen, 5);
  // Reference: 4 uninterrupted steps of the dense plan.
  auto straight = Runtime::create(makeLinearPlan(model, 1, 1), {});
  REQUIRE(straight);
  REQUIRE((*straight)->initParams(9));
  double straightLoss = 0;
  for (int64_t step = 1; step <= 4; ++step) {
    REQUIRE((*straight)->setBatch(data.batch(step)));
    auto stats = (*straight)->step();
    REQUIRE(stats);
    straightLoss = stats->loss;
  }

  // 2 steps on tp=2, saved; then 2 more on a fresh dense runtime.
  auto first = Runtime::create(makeLinearPlan(model, 1, 2), {});
  REQUIRE(first);
  REQUIRE((*first)->initParams(9));
  for (int64_t step = 1; step <= 2; ++step) {
    REQUIRE((*first)->setBatch(data.batch(step)));
    REQUIRE((*first)->step());
  }
  REQUIRE(saveCheckpoint(**first, checkpoint.path));
  auto file = plan::readSafeTensors(checkpoint.path);
  REQUIRE(file);
  REQUIRE(file->find("head.weight.exp_avg_sq"));
  REQUIRE(file->metadata.at("step") == "2");

  auto second = Runtime::create(makeLinearPlan(model, 1, 1), {});
  REQUIRE(second);
  Status loaded = loadCheckpoint(**second, checkpoint.path);
  INFO(loaded.message());
  REQUIRE(loaded);
  REQUIRE((*second)->nextStep() == 3);
  double resumedLoss = 0;
  for (int64_t step = 3; step <= 4; ++step) {
    REQUIRE((*second)->setBatch(data.batch(step)));
    auto stats = (*second)->step();
    REQUIRE(stats);
    resumedLoss = stats->loss;
  }
  REQUIRE(resumedLoss == Approx(straightLoss).epsilon(1e-6));

  // A checkpoint of another model is invalid input naming the tensor.
  plan::TensorFile other;
  other.tensors.push_back(
      {"embed.weight", DType::F32, {2, 2}, ByteVector(16, 0)});
  REQUIRE(plan::writeSafeTensors(checkpoint.path, other));
  Status mismatch = loadCheckpoint(**second, checkpoint.path);
  REQUIRE(mismatch.code() == Status::Code::InvalidInput);
  REQUIRE(mismatch.message().find("embed.weight") != std::string::npos);
}

TEST_CASE("metrics report tokens per second and the median step",
          "[executor]") {
  Metrics metrics(1000);
  metrics.record(1, {.loss = 5.0, .seconds = 0.5});
  metrics.record(2, {.loss = 4.0, .seconds = 0.1});
  const StepRecord &last = metrics.record(3, {.loss = 3.5, .seconds = 0.2});
  REQUIRE(last.tokensPerSecond == Approx(5000));
  REQUIRE(metrics.medianSeconds() == Approx(0.2));
  REQUIRE(metrics.medianTokensPerSecond() == Approx(5000));
  REQUIRE(Metrics::formatStep(last) ==
          "step    3  loss 3.50000  time 200.0 ms  tokens/s 5000");
}

TEST_CASE("a checkpoint carries its data position, range-checked",
          "[executor]") {
  LinearModel model;
  TempPath checkpoint("position.safetensors");
  auto runtime = Runtime::create(makeLinearPlan(model, 1, 1), {});
  REQUIRE(runtime);
  REQUIRE((*runtime)->initParams(2));
  REQUIRE(saveCheckpoint(**runtime, checkpoint.path, true, 12345));
  auto file = plan::readSafeTensors(checkpoint.path);
  REQUIRE(file);
  REQUIRE(file->metadata.at("data_position") == "12345");
  REQUIRE(file->metadata.at("lr_schedule") == "constant");
  int64_t position = -7;
  REQUIRE(loadCheckpoint(**runtime, checkpoint.path, &position));
  REQUIRE(position == 12345);
  for (const char *bad : {"-1", "12x", "", "4611686018427387905"}) {
    file->metadata["data_position"] = bad;
    REQUIRE(plan::writeSafeTensors(checkpoint.path, *file));
    Status status = loadCheckpoint(**runtime, checkpoint.path, &position);
    INFO(bad);
    REQUIRE(status.code() == Status::Code::InvalidInput);
    REQUIRE(status.message() == checkpoint.path + ": metadata data_position '" +
                                    bad +
                                    "' is not a window count in [0, 2^62]");
  }
  file->metadata.erase("data_position");
  REQUIRE(plan::writeSafeTensors(checkpoint.path, *file));
  REQUIRE(loadCheckpoint(**runtime, checkpoint.path, &position));
  REQUIRE(position == -1);
}

TEST_CASE("the step line shows the lr, the elapsed time and the rest",
          "[executor]") {
  StepRecord record{
      .step = 12, .loss = 3.25, .seconds = 0.5, .tokensPerSecond = 2048};
  REQUIRE(Metrics::formatStep(record) ==
          "step   12  loss 3.25000  time 500.0 ms  tokens/s 2048");
  record.lr = 3e-4;
  record.elapsedSeconds = 3725.4;
  record.etaSeconds = 59.6;
  REQUIRE(Metrics::formatStep(record) ==
          "step   12  loss 3.25000  lr 3.000e-04  time 500.0 ms  tokens/s "
          "2048  elapsed 1:02:05  eta 0:01:00");
  // A plan that clips shows the norm before clipping.
  record.gradNorm = 2.5;
  REQUIRE(
      Metrics::formatStep(record) ==
      "step   12  loss 3.25000  lr 3.000e-04  grad_norm 2.5  time 500.0 ms  "
      "tokens/s 2048  elapsed 1:02:05  eta 0:01:00");
}

TEST_CASE("shuffled windows visit each window once per pass, far apart",
          "[executor]") {
  TempPath file("shuffle.bin");
  // 10 whole windows of 3 tokens (and a ragged tail of 2 that is skipped):
  // window k holds 3k, 3k+1, 3k+2.
  std::vector<int32_t> ids(32);
  for (size_t i = 0; i < ids.size(); ++i)
    ids[i] = static_cast<int32_t>(i);
  writeInts(file.path, ids);
  auto loader = DataLoader::fromFile(file.path, 64, 1, 3);
  REQUIRE(loader);
  REQUIRE(loader->numWindows() == 10);
  loader->setShuffle(true);
  // a = 7 (nearest 0.618 * 10 coprime to 10): windows 0, 7, 4, 1, 8, ...
  std::vector<int32_t> firsts;
  for (int64_t w = 0; w < 10; ++w) {
    std::vector<int32_t> batch = loader->batchAt(w);
    REQUIRE(batch[1] == batch[0] + 1);
    REQUIRE(batch[2] == batch[0] + 2);
    firsts.push_back(batch[0] / 3);
  }
  REQUIRE(firsts == std::vector<int32_t>{0, 7, 4, 1, 8, 5, 2, 9, 6, 3});
  REQUIRE(loader->batchAt(10) == loader->batchAt(0)); // the next pass
  // The order a checkpoint stores gives another loader the same windows.
  DataOrder order = loader->order();
  REQUIRE(order.stride == 7);
  REQUIRE(order.numWindows == 10);
  auto resumed = DataLoader::fromFile(file.path, 64, 1, 3);
  REQUIRE(resumed);
  REQUIRE(resumed->setOrder(order));
  for (int64_t w = 0; w < 10; ++w)
    REQUIRE(resumed->batchAt(w) == loader->batchAt(w));
  loader->setShuffle(false);
  REQUIRE(loader->order().stride == 0);
  REQUIRE(loader->batchAt(1) == std::vector<int32_t>{3, 4, 5});
}

TEST_CASE("an order that does not fit the file is refused", "[executor]") {
  TempPath file("order.bin");
  std::vector<int32_t> ids(30); // 10 windows of 3 tokens
  for (size_t i = 0; i < ids.size(); ++i)
    ids[i] = static_cast<int32_t>(i);
  writeInts(file.path, ids);
  auto loader = DataLoader::fromFile(file.path, 64, 1, 3);
  REQUIRE(loader);
  Status otherFile = loader->setOrder({7, 12});
  REQUIRE(otherFile.code() == Status::Code::InvalidInput);
  REQUIRE(otherFile.message() ==
          "the run was shuffled over 12 windows of 3 tokens, but the data "
          "holds 10 (another file?)");
  for (int64_t stride : {5, 10, -3}) {
    Status bad = loader->setOrder({stride, 10});
    INFO("stride " << stride);
    REQUIRE(bad.code() == Status::Code::InvalidInput);
    REQUIRE(bad.message() == "shuffle stride " + std::to_string(stride) +
                                 " is not in [1, 10) and coprime to 10");
  }
  REQUIRE(loader->batchAt(1) == std::vector<int32_t>{3, 4, 5}); // unchanged
  REQUIRE(loader->setOrder({3, 10}));
  REQUIRE(loader->batchAt(1) == std::vector<int32_t>{9, 10, 11});
}
