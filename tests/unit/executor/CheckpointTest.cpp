//===- CheckpointTest.cpp - checkpoint metadata is range-checked ----------===//
//
// A checkpoint is a file a user hands to --load, so everything in it is
// untrusted: its metadata and its list of tensors are checked before a byte
// of it is loaded.

#include "executor/Checkpoint.h"
#include "executor/DataLoader.h"

#include "TestPlans.h"
#include "tests/unit/NoThreads.h"

#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iterator>

using namespace sharc;
using namespace sharc::exec;
using namespace sharc::exec::test;

namespace {
struct TempFile {
  std::string path = "/tmp/sharc-checkpoint-test-" +
                     std::to_string(::getpid()) + ".safetensors";
  ~TempFile() { std::remove(path.c_str()); }
};

/// A good checkpoint of the linear model after 2 steps, as a TensorFile.
plan::TensorFile trainedCheckpoint(Runtime &runtime, const std::string &path) {
  REQUIRE(runtime.initParams(3));
  LinearModel model;
  DataLoader data =
      DataLoader::synthetic(model.vocab, model.batch, model.seqLen, 1);
  for (int64_t step = 1; step <= 2; ++step) {
    REQUIRE(runtime.setBatch(data.batch(step)));
    REQUIRE(runtime.step());
  }
  REQUIRE(saveCheckpoint(runtime, path));
  auto file = plan::readSafeTensors(path);
  REQUIRE(file);
  return *file;
}

/// Loads `file` into a fresh runtime whose parameters were drawn from seed
/// 7; returns the status and whether any parameter changed.
std::pair<Status, bool> loadInto(const plan::TensorFile &file,
                                 const std::string &path) {
  REQUIRE(plan::writeSafeTensors(path, file));
  auto runtime = Runtime::create(makeLinearPlan(LinearModel{}, 1, 1), {});
  REQUIRE(runtime);
  REQUIRE((*runtime)->initParams(7));
  auto before = (*runtime)->gatherParams();
  int64_t position = -1;
  DataOrder order;
  Status status = loadCheckpoint(**runtime, path, &position, &order);
  auto after = (*runtime)->gatherParams();
  bool changed = false;
  for (size_t i = 0; i < before->tensors.size(); ++i)
    changed |= before->tensors[i].bytes != after->tensors[i].bytes;
  return {status, changed};
}
} // namespace

TEST_CASE("checkpoint metadata out of range is refused before loading",
          "[executor]") {
  TempFile temp;
  auto runtime = Runtime::create(makeLinearPlan(LinearModel{}, 1, 1), {});
  REQUIRE(runtime);
  const plan::TensorFile good = trainedCheckpoint(**runtime, temp.path);
  REQUIRE(good.metadata.at("step") == "2");
  auto [ok, loaded] = loadInto(good, temp.path);
  INFO(ok.message());
  REQUIRE(ok);
  REQUIRE(loaded);

  struct Case {
    const char *key, *value, *message;
  };
  for (const Case &bad :
       {Case{"step", "9223372036854775807",
             "metadata step '9223372036854775807' is not a step count in "
             "[0, 1000000000000]"},
        Case{"step", "-1",
             "metadata step '-1' is not a step count in [0, 1000000000000]"},
        Case{"step", "2 ",
             "metadata step '2 ' is not a step count in [0, 1000000000000]"},
        Case{"step", "",
             "metadata step '' is not a step count in [0, "
             "1000000000000]"},
        Case{"format", "pytorch",
             "metadata format 'pytorch' is not "
             "'sharc-checkpoint'"},
        Case{"optimizer_state", "sgd",
             "metadata optimizer_state 'sgd' is not 'adamw'"},
        Case{"data_shuffle", "7",
             "metadata data_shuffle '7' is not <stride>/<windows>, both "
             "positive"},
        Case{"data_shuffle", "7/",
             "metadata data_shuffle '7/' is not <stride>/<windows>, both "
             "positive"},
        Case{"data_shuffle", "0/10",
             "metadata data_shuffle '0/10' is not <stride>/<windows>, both "
             "positive"},
        Case{"data_shuffle", "3/10x",
             "metadata data_shuffle '3/10x' is not <stride>/<windows>, both "
             "positive"}}) {
    plan::TensorFile file = good;
    file.metadata[bad.key] = bad.value;
    auto [status, changed] = loadInto(file, temp.path);
    INFO(bad.key << " = '" << bad.value << "': " << status.message());
    REQUIRE(status.code() == Status::Code::InvalidInput);
    REQUIRE(status.message() == temp.path + ": " + bad.message);
    REQUIRE_FALSE(changed);
  }
}

TEST_CASE("a checkpoint of a larger model is refused, not half loaded",
          "[executor]") {
  TempFile temp;
  auto runtime = Runtime::create(makeLinearPlan(LinearModel{}, 1, 1), {});
  REQUIRE(runtime);
  plan::TensorFile file = trainedCheckpoint(**runtime, temp.path);
  size_t numTensors = file.tensors.size();
  plan::NamedTensor extra = file.tensors.front();
  extra.name = "layers.1.weight";
  file.tensors.push_back(extra);
  auto [status, changed] = loadInto(file, temp.path);
  REQUIRE(status.code() == Status::Code::InvalidInput);
  REQUIRE(status.message() ==
          temp.path +
              ": tensor 'layers.1.weight' is no parameter of model 'linear' "
              "nor its optimizer state (" +
              std::to_string(numTensors + 1) +
              " tensors in the file; a checkpoint of another model?)");
  REQUIRE_FALSE(changed);
}

TEST_CASE("a checkpoint keeps a shuffled run's order", "[executor]") {
  TempFile temp;
  auto runtime = Runtime::create(makeLinearPlan(LinearModel{}, 1, 1), {});
  REQUIRE(runtime);
  REQUIRE((*runtime)->initParams(3));
  for (DataOrder saved : {DataOrder{7, 10}, DataOrder{}}) {
    REQUIRE(saveCheckpoint(**runtime, temp.path, true, 12, saved));
    int64_t position = -1;
    DataOrder loaded{99, 99};
    REQUIRE(loadCheckpoint(**runtime, temp.path, &position, &loaded));
    REQUIRE(position == 12);
    REQUIRE(loaded.stride == saved.stride);
    REQUIRE(loaded.numWindows == saved.numWindows);
  }
}

TEST_CASE("a checkpoint written a tensor at a time is the whole file",
          "[executor]") {
  // The file the whole-file writer makes of every gathered tensor: what a
  // save held in memory at once before it was streamed.
  for (auto [dp, tp] : {std::pair<int64_t, int64_t>{1, 1}, {2, 1}, {1, 2}}) {
    INFO("dp " << dp << " tp " << tp);
    TempFile temp;
    auto runtime = Runtime::create(makeLinearPlan(LinearModel{}, dp, tp), {});
    REQUIRE(runtime);
    trainedCheckpoint(**runtime, temp.path);
    std::ifstream streamed(temp.path, std::ios::binary);
    std::string streamedBytes((std::istreambuf_iterator<char>(streamed)),
                              std::istreambuf_iterator<char>());

    auto params = (*runtime)->gatherParams();
    auto state = (*runtime)->gatherOptimizerState();
    REQUIRE(params);
    REQUIRE(state);
    plan::TensorFile whole = std::move(*params);
    for (plan::NamedTensor &tensor : state->tensors)
      whole.tensors.push_back(std::move(tensor));
    whole.metadata = {{"format", "sharc-checkpoint"},
                      {"model", "linear"},
                      {"step", "2"},
                      {"lr_schedule", "constant"},
                      {"optimizer_state", "adamw"}};
    REQUIRE(plan::writeSafeTensors(temp.path, whole));
    std::ifstream written(temp.path, std::ios::binary);
    std::string wholeBytes((std::istreambuf_iterator<char>(written)),
                           std::istreambuf_iterator<char>());
    REQUIRE(streamedBytes.size() == wholeBytes.size());
    REQUIRE(streamedBytes == wholeBytes);
  }
}

#ifdef SHARC_NO_THREADS_TESTABLE
TEST_CASE("a background snapshot needs twice its size available",
          "[executor]") {
  std::string why;
  int64_t gb = 1000 * 1000 * 1000;
  REQUIRE(snapshotFits(10 * gb, 20 * gb, why));
  REQUIRE(why.empty());
  REQUIRE_FALSE(snapshotFits(10 * gb, 20 * gb - 1, why));
  REQUIRE(why == "a checkpoint of 10.00 GB is more than half of the 20.00 GB "
                 "this host has available");
  REQUIRE_FALSE(snapshotFits(1, -1, why));
  REQUIRE(why == "this host does not say how much memory it has available");
}

TEST_CASE("a host that starts no thread fails a step and still saves",
          "[.capped]") {
  TempFile temp;
  auto runtime = Runtime::create(makeLinearPlan(LinearModel{}, 2, 1), {});
  if (!runtime || !(*runtime)->initParams(3))
    _exit(2);
  LinearModel model;
  DataLoader data =
      DataLoader::synthetic(model.vocab, model.batch, model.seqLen, 1);
  if (!(*runtime)->setBatch(data.batch(1)))
    _exit(2);
  // Room for a small checkpoint, not for one 8 MiB thread stack.
  sharc::test::capThreads(4 << 20);
  // Two ranks' streams need their threads: the step fails, naming why.
  auto step = (*runtime)->step();
  if (step || step.status().message().find("could not start a host thread") ==
                  std::string::npos)
    _exit(10);
  // The save's writer thread does not start either: each tensor is
  // written before the next is gathered, and the file is whole.
  if (!saveCheckpoint(**runtime, temp.path))
    _exit(6);
  auto file = plan::readSafeTensors(temp.path);
  auto params = (*runtime)->gatherParams();
  if (!file || !params || file->tensors.size() < params->tensors.size())
    _exit(7);
  for (const plan::NamedTensor &tensor : params->tensors) {
    auto saved = std::find_if(
        file->tensors.begin(), file->tensors.end(),
        [&](const plan::NamedTensor &t) { return t.name == tensor.name; });
    if (saved == file->tensors.end() || saved->bytes != tensor.bytes)
      _exit(8);
  }
  _exit(0);
}

TEST_CASE("a host out of threads fails a step with a message, not an abort",
          "[executor]") {
  int code = sharc::test::runInFreshProcess(
      "a host that starts no thread fails a step and still saves");
  INFO("exit " << code
               << " (2: set-up; 3: setrlimit; 4: a thread started anyway; 5: "
                  "no exec; 6: the save failed; 7, 8: the file lacks a "
                  "parameter; 10: the step did not fail by name; 128 + N: "
                  "signal N)");
  REQUIRE(code == 0);
}
#endif
