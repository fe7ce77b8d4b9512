//===- ConfigFuzzer.cpp - fuzz the model and run YAML reader --------------===//
//
// The input is a model file's text. The reader must return an error or a
// config whose sizes are the positive, int64-safe numbers the builder takes
// without checking them again.
//
//===----------------------------------------------------------------------===//

#include "ir/frontend/ModelConfig.h"
#include "tests/fuzz/FuzzCheck.h"

#include <cmath>
#include <cstdint>
#include <string>

using namespace sharc::frontend;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string text(reinterpret_cast<const char *>(data), size);
  ConfigResult result = readConfigString(text, "fuzz.yaml");
  SHARC_FUZZ_CHECK(result.config.has_value() != result.error.has_value(),
                   "exactly one of config and error");
  if (result.error) {
    const SourceLoc &loc = result.error->loc;
    SHARC_FUZZ_CHECK(loc.line >= 0 && loc.col >= 0, "locations count from 1");
    SHARC_FUZZ_CHECK(!result.error->message.empty(), "an error says why");
    return 0;
  }
  const ModelConfig &m = result.config->model;
  for (int64_t size : {m.hiddenSize.value, m.numLayers.value, m.numHeads.value,
                       m.numKvHeads.value, m.headDim.value,
                       m.intermediateSize.value, m.vocabSize.value})
    SHARC_FUZZ_CHECK(size >= 1, "model sizes are positive");
  SHARC_FUZZ_CHECK(m.numHeads.value % m.numKvHeads.value == 0,
                   "query heads are whole groups of kv heads");
  const RunConfig &run = result.config->run;
  for (int64_t size :
       {run.seqLen.value, run.microBatchSize.value, run.numMicrobatches.value})
    SHARC_FUZZ_CHECK(size >= 1, "run sizes are positive");
  const OptimizerConfig &opt = run.optimizer;
  for (double value : {opt.lr.value, opt.beta1.value, opt.beta2.value,
                       opt.eps.value, opt.weightDecay.value})
    SHARC_FUZZ_CHECK(std::isfinite(value) && value >= 0,
                     "optimizer settings are finite and non-negative");
  SHARC_FUZZ_CHECK(opt.beta1.value < 1 && opt.beta2.value < 1, "betas below 1");
  return 0;
}
