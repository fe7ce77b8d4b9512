//===- ModelConfigTest.cpp - the YAML reader of model and run configs -----===//

#include "ir/frontend/ModelConfig.h"
#include "ir/frontend/ConfigDiagnostics.h"

#include <catch2/catch.hpp>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

using namespace sharc::frontend;
using namespace std::string_literals;

namespace {

const std::string modelsDir = std::string(SHARC_SOURCE_DIR) + "/models/";

// Lines 1-7; each bad case below edits one line or appends from line 8.
const std::string tinyModel = "model:\n"                   // 1
                              "  name: t\n"                // 2
                              "  hidden_size: 64\n"        // 3
                              "  num_hidden_layers: 2\n"   // 4
                              "  num_attention_heads: 4\n" // 5
                              "  num_key_value_heads: 2\n" // 6
                              "  vocab_size: 128\n";       // 7

/// tinyModel with the line that starts with `prefix` replaced (or dropped
/// when `line` is empty).
std::string tinyWith(const std::string &prefix, const std::string &line) {
  std::string text = tinyModel;
  size_t start = text.find(prefix);
  REQUIRE(start != std::string::npos);
  size_t end = text.find('\n', start) + 1;
  return text.replace(start, end - start, line.empty() ? "" : line + "\n");
}

ConfigError errorOf(const ConfigResult &result) {
  REQUIRE_FALSE(result.ok());
  REQUIRE(result.error.has_value());
  return *result.error;
}

std::string writeTemp(const std::string &name, const std::string &text) {
  std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("sharc-frontend-" + name);
  std::ofstream(path, std::ios::binary) << text;
  return path.string();
}

struct BadCase {
  const char *what;
  std::string text;
  int line, col;
  std::string phrase;
};

} // namespace

TEST_CASE("intermediate size follows MiniMind's pi rule", "[frontend]") {
  // Hand-computed: 768*pi/64 = 37.70 -> 38*64; 64*pi/64 = 3.14 -> 4*64;
  // 512*pi/64 = 25.13 -> 26*64.
  CHECK(defaultIntermediateSize(768) == 2432);
  CHECK(defaultIntermediateSize(64) == 256);
  CHECK(defaultIntermediateSize(512) == 1664);
}

TEST_CASE("omitted fields take defaults and the place that decides them",
          "[frontend]") {
  ConfigResult result = readConfigString(tinyModel, "t.yaml");
  REQUIRE(result.ok());
  REQUIRE_FALSE(result.error);
  const ModelConfig &model = result.config->model;
  CHECK(model.name.value == "t");
  CHECK(model.headDim.value == 16);
  CHECK(model.intermediateSize.value == 256);
  CHECK(model.ropeTheta.value == 1.0e6);
  CHECK(model.rmsNormEps.value == 1.0e-6);
  CHECK(model.initStd.value == 0.02);
  CHECK_FALSE(model.tieWordEmbeddings.value);
  // Values point at what was written, defaults at their deciding key.
  CHECK(model.hiddenSize.loc == SourceLoc{"t.yaml", 3, 16});
  CHECK(model.headDim.loc == SourceLoc{"t.yaml", 5, 24});
  CHECK(model.intermediateSize.loc == SourceLoc{"t.yaml", 3, 16});
  CHECK(model.loc == SourceLoc{"t.yaml", 1, 1});
  CHECK(model.ropeTheta.loc == SourceLoc{"t.yaml", 1, 1});

  const RunConfig &run = result.config->run;
  CHECK(run.seqLen.value == 128);
  CHECK(run.microBatchSize.value == 2);
  CHECK(run.numMicrobatches.value == 1);
  CHECK(run.seed.value == 42);
  CHECK(run.dtype.value == "float32");
  CHECK(run.optimizer.lr.value == 5.0e-4);
  CHECK(run.optimizer.beta1.value == 0.9);
  CHECK(run.optimizer.beta2.value == 0.999);
  CHECK(run.optimizer.eps.value == 1.0e-8);
  CHECK(run.optimizer.weightDecay.value == 0.01);
  CHECK(run.seqLen.loc == SourceLoc{"t.yaml", 1, 1});
}

TEST_CASE("head_dim defaults to hidden_size / num_attention_heads",
          "[frontend]") {
  ConfigResult result =
      readConfigString(tinyWith("  hidden_size", "  hidden_size: 768") +
                           "  intermediate_size: 100\n",
                       "t.yaml");
  REQUIRE(result.ok());
  CHECK(result.config->model.headDim.value == 192);
  CHECK(result.config->model.intermediateSize.value == 100);
}

TEST_CASE("minimind.yaml holds the original configuration", "[frontend]") {
  std::string path = modelsDir + "minimind.yaml";
  ConfigResult result = readConfigFile(path);
  INFO((result.error ? result.error->format() : ""));
  REQUIRE(result.ok());
  const ModelConfig &model = result.config->model;
  CHECK(model.name.value == "minimind");
  CHECK(model.hiddenSize.value == 768);
  CHECK(model.numLayers.value == 8);
  CHECK(model.numHeads.value == 8);
  CHECK(model.numKvHeads.value == 4);
  CHECK(model.headDim.value == 96);
  CHECK(model.intermediateSize.value == 2432);
  CHECK(model.vocabSize.value == 6400);
  CHECK(model.ropeTheta.value == 1.0e6);
  CHECK(model.rmsNormEps.value == 1.0e-6);
  CHECK_FALSE(model.tieWordEmbeddings.value);
  CHECK(model.initStd.value == 0.02);
  CHECK(model.hiddenSize.loc == SourceLoc{path, 4, 16});
  const RunConfig &run = result.config->run;
  CHECK(run.seqLen.value == 64);
  CHECK(run.microBatchSize.value == 2);
  CHECK(run.dtype.value == "float32");
}

TEST_CASE("tiny.yaml and tiny-tied.yaml differ only in tying", "[frontend]") {
  for (const char *name : {"tiny.yaml", "tiny-tied.yaml"}) {
    ConfigResult result = readConfigFile(modelsDir + name);
    INFO(name << ": " << (result.error ? result.error->format() : ""));
    REQUIRE(result.ok());
    const ModelConfig &model = result.config->model;
    CHECK(model.hiddenSize.value == 64);
    CHECK(model.numLayers.value == 2);
    CHECK(model.numHeads.value == 4);
    CHECK(model.numKvHeads.value == 2);
    CHECK(model.headDim.value == 16);
    CHECK(model.intermediateSize.value == 256);
    CHECK(model.vocabSize.value == 128);
    CHECK(model.tieWordEmbeddings.value ==
          (std::string(name) == "tiny-tied.yaml"));
    const RunConfig &run = result.config->run;
    CHECK(run.seqLen.value == 16);
    CHECK(run.microBatchSize.value == 2);
    CHECK(run.numMicrobatches.value == 1);
    CHECK(run.dtype.value == "float32");
    CHECK(run.optimizer.lr.value == 1.0e-3);
    CHECK(run.optimizer.beta2.value == 0.999);
    CHECK(run.optimizer.weightDecay.value == 0.01);
  }
}

TEST_CASE("a run file overrides the model file's run fields one by one",
          "[frontend]") {
  std::string modelPath = modelsDir + "tiny.yaml";
  std::string runPath = writeTemp("override.yaml", "run:\n"
                                                   "  seq_len: 32\n"
                                                   "  dtype: bfloat16\n"
                                                   "  optimizer:\n"
                                                   "    weight_decay: 0.1\n");
  ConfigResult result = readConfigFile(modelPath, runPath);
  INFO((result.error ? result.error->format() : ""));
  REQUIRE(result.ok());
  const RunConfig &run = result.config->run;
  CHECK(run.seqLen.value == 32);
  CHECK(run.seqLen.loc == SourceLoc{runPath, 2, 12});
  CHECK(run.dtype.value == "bfloat16");
  CHECK(run.optimizer.weightDecay.value == 0.1);
  // Kept from tiny.yaml, with tiny.yaml's places.
  CHECK(run.microBatchSize.value == 2);
  CHECK(run.microBatchSize.loc == SourceLoc{modelPath, 11, 21});
  CHECK(run.optimizer.lr.value == 1.0e-3);
  CHECK(run.optimizer.lr.loc == SourceLoc{modelPath, 14, 9});
  // Still defaulted: now governed by the run file's sections.
  CHECK(run.numMicrobatches.value == 1);
  CHECK(run.numMicrobatches.loc == SourceLoc{runPath, 1, 1});
  CHECK(run.optimizer.eps.loc == SourceLoc{runPath, 4, 3});
  CHECK(result.config->model.hiddenSize.value == 64);
}

TEST_CASE("a run file must hold only a run section", "[frontend]") {
  std::string runPath =
      writeTemp("bad-run.yaml", "run:\n  seq_len: 8\nmodel:\n  name: x\n");
  ConfigError error = errorOf(readConfigFile(modelsDir + "tiny.yaml", runPath));
  CHECK(error.loc == SourceLoc{runPath, 3, 1});
  CHECK(error.message == "unexpected section 'model' in a run file (the "
                         "model comes from the model file)");

  std::string noRun = writeTemp("no-run.yaml", "# nothing\n");
  error = errorOf(readConfigFile(modelsDir + "tiny.yaml", noRun));
  CHECK(error.loc == SourceLoc{noRun, 1, 1});
  CHECK(error.message ==
        "empty document (expected a mapping with a 'run' section)");
}

TEST_CASE("a missing file is an error about the file", "[frontend]") {
  ConfigError error = errorOf(readConfigFile("/nonexistent/model.yaml"));
  CHECK(error.loc.line == 0);
  CHECK(error.format() ==
        "/nonexistent/model.yaml: cannot open file: No such file or "
        "directory");
  error = errorOf(readConfigFile(modelsDir + "tiny.yaml", "/nonexistent/r"));
  CHECK(error.format() ==
        "/nonexistent/r: cannot open file: No such file or directory");
  error = errorOf(readConfigFile(modelsDir));
  CHECK(error.message == "cannot open file: it is a directory");
}

TEST_CASE("each bad input gives one error at its line and column",
          "[frontend]") {
  const BadCase cases[] = {
      {"misspelt key", tinyWith("  hidden_size", "  hiden_size: 64"), 3, 3,
       "unknown key 'hiden_size' in model (did you mean 'hidden_size'?)"},
      {"swapped letters", tinyWith("  vocab_size", "  vocab_szie: 128"), 7, 3,
       "(did you mean 'vocab_size'?)"},
      {"unrelated key", tinyModel + "  colour: red\n", 8, 3,
       "unknown key 'colour' in model"},
      {"misspelt section", "modle:\n  name: t\n", 1, 1,
       "unknown key 'modle' at top level (did you mean 'model'?)"},
      {"string for integer", tinyWith("  hidden_size", "  hidden_size: abc"), 3,
       16, "hidden_size must be an integer, got 'abc'"},
      {"quoted integer", tinyWith("  hidden_size", "  hidden_size: \"64\""), 3,
       16, "hidden_size must be an integer, got a quoted string \"64\""},
      {"float for integer", tinyWith("  hidden_size", "  hidden_size: 64.0"), 3,
       16, "hidden_size must be an integer, got '64.0'"},
      {"list for scalar", tinyWith("  hidden_size", "  hidden_size: [64]"), 3,
       16, "hidden_size must be an integer, got a list"},
      {"empty value", tinyWith("  hidden_size", "  hidden_size:"), 3, 3,
       "hidden_size must be an integer, got an empty value"},
      {"non-bool tie", tinyModel + "  tie_word_embeddings: yes\n", 8, 24,
       "tie_word_embeddings must be true or false, got 'yes'"},
      {"non-number float", tinyModel + "  rope_theta: big\n", 8, 15,
       "rope_theta must be a number, got 'big'"},
      {"missing field", tinyWith("  vocab_size", ""), 1, 1,
       "missing required key 'vocab_size' in model"},
      {"zero hidden", tinyWith("  hidden_size", "  hidden_size: 0"), 3, 16,
       "hidden_size must be positive, got 0"},
      {"negative layers",
       tinyWith("  num_hidden_layers", "  num_hidden_layers: -2"), 4, 22,
       "num_hidden_layers must be positive, got -2"},
      {"zero heads",
       tinyWith("  num_attention_heads", "  num_attention_heads: 0"), 5, 24,
       "num_attention_heads must be positive, got 0"},
      {"zero vocab", tinyWith("  vocab_size", "  vocab_size: 0"), 7, 15,
       "vocab_size must be positive, got 0"},
      {"huge size", tinyWith("  vocab_size", "  vocab_size: 99999999999"), 7,
       15, "vocab_size must be at most 2147483647, got 99999999999"},
      {"past int64",
       tinyWith("  vocab_size", "  vocab_size: -99999999999999999999"), 7, 15,
       "vocab_size must be positive, got -99999999999999999999"},
      {"zero rope_theta", tinyModel + "  rope_theta: 0.0\n", 8, 15,
       "rope_theta must be positive, got 0.0"},
      {"float overflow", tinyModel + "  init_std: 1e999\n", 8, 13,
       "init_std is out of range, got 1e999"},
      {"kv heads do not divide heads",
       tinyWith("  num_key_value_heads", "  num_key_value_heads: 3"), 6, 24,
       "num_attention_heads (4) must be divisible by num_key_value_heads (3)"},
      {"hidden not divisible by heads",
       tinyWith("  hidden_size", "  hidden_size: 66"), 5, 24,
       "hidden_size (66) must be divisible by num_attention_heads (4) when "
       "head_dim is omitted"},
      {"odd head_dim", tinyModel + "  head_dim: 15\n", 8, 13,
       "head_dim (15) must be even for rotary embeddings"},
      {"duplicate key", tinyModel + "  hidden_size: 32\n", 8, 3,
       "duplicate key 'hidden_size' in model (first at line 3)"},
      {"model not a mapping", "model: tiny\n", 1, 8,
       "model must be a mapping, got 'tiny'"},
      {"model missing", "run:\n  seq_len: 16\n", 1, 1,
       "missing required section 'model'"},
      {"top level a list", "- model\n- run\n", 1, 1,
       "top level must be a mapping with a 'model' section, got a list"},
      {"top level a scalar", "hello\n", 1, 1,
       "top level must be a mapping with a 'model' section, got 'hello'"},
      {"empty file", "", 1, 1,
       "empty document (expected a mapping with a 'model' section)"},
      {"only comments", "# a model\n\n# to come\n", 1, 1, "empty document"},
      {"two documents", tinyModel + "---\nmodel:\n  name: u\n", 9, 1,
       "expected one YAML document, found 2"},
      {"bad indentation", "model:\n  name: t\n   hidden_size: 64\n", 3, 15,
       "invalid YAML: illegal map value"},
      {"unclosed list", "model:\n  name: t\n  hidden_size: [64\n  x: 1\n", 4, 4,
       "invalid YAML: end of sequence flow not found"},
      {"NUL byte", "model:\n  name: t\0x\n"s, 2, 10,
       "NUL byte in input (expected UTF-8 YAML text)"},
      {"invalid UTF-8", "model:\n  name: caf\xe9\n", 2, 12,
       "invalid UTF-8 (byte 0xe9)"},
      {"overlong UTF-8", "model:\n  name: \xc0\xaf\n", 2, 9,
       "invalid UTF-8 (byte 0xc0)"},
      {"control character", "model:\n  na\x01me: t\n", 2, 5,
       "control character 0x01 in input"},
      {"short seq_len", tinyModel + "run:\n  seq_len: 1\n", 9, 12,
       "seq_len must be at least 2 (the shifted loss needs two tokens), got "
       "1"},
      {"zero batch", tinyModel + "run:\n  micro_batch_size: 0\n", 9, 21,
       "micro_batch_size must be positive, got 0"},
      {"negative seed", tinyModel + "run:\n  seed: -1\n", 9, 9,
       "seed must be non-negative, got -1"},
      {"dtype typo", tinyModel + "run:\n  dtype: flaot32\n", 9, 10,
       "unknown dtype 'flaot32' (did you mean 'float32'?)"},
      {"dtype near two", tinyModel + "run:\n  dtype: float16\n", 9, 10,
       "unknown dtype 'float16' (did you mean 'bfloat16'?)"},
      {"dtype unknown", tinyModel + "run:\n  dtype: fp8\n", 9, 10,
       "unknown dtype 'fp8' (expected 'float32', 'bfloat16' or 'bf16-mixed')"},
      {"run key typo", tinyModel + "run:\n  seqlen: 16\n", 9, 3,
       "unknown key 'seqlen' in run (did you mean 'seq_len'?)"},
      {"betas of three",
       tinyModel + "run:\n  optimizer:\n    betas: [0.9, 0.99, 0.999]\n", 10,
       12, "betas must be a list of two numbers, got 3"},
      {"betas a scalar", tinyModel + "run:\n  optimizer:\n    betas: 0.9\n", 10,
       12, "betas must be a list of two numbers, got '0.9'"},
      {"beta of one", tinyModel + "run:\n  optimizer:\n    betas: [0.9, 1.0]\n",
       10, 18, "betas[1] must be in [0, 1), got 1.0"},
      {"negative lr", tinyModel + "run:\n  optimizer:\n    lr: -1.0e-3\n", 10,
       9, "lr must be non-negative, got -1.0e-3"},
      {"negative eps", tinyModel + "run:\n  optimizer:\n    eps: -1\n", 10, 10,
       "eps must be non-negative, got -1"},
      {"negative weight decay",
       tinyModel + "run:\n  optimizer:\n    weight_decay: -0.1\n", 10, 19,
       "weight_decay must be non-negative, got -0.1"},
      {"optimizer key typo",
       tinyModel + "run:\n  optimizer:\n    weight_decya: 0.1\n", 10, 5,
       "unknown key 'weight_decya' in run.optimizer (did you mean "
       "'weight_decay'?)"},
      {"list as key", tinyModel + "  [a, b]: 1\n", 8, 3,
       "keys in model must be names, got a list"},
  };
  for (const BadCase &bad : cases) {
    INFO(bad.what);
    ConfigError error = errorOf(readConfigString(bad.text, "bad.yaml"));
    INFO(error.format());
    CHECK(error.loc.file == "bad.yaml");
    CHECK(error.loc.line == bad.line);
    CHECK(error.loc.col == bad.col);
    CHECK_THAT(error.message, Catch::Contains(bad.phrase));
  }
}

TEST_CASE("deep nesting is an error, not a stack overflow", "[frontend]") {
  ConfigError error = errorOf(
      readConfigString("model: " + std::string(100000, '['), "deep.yaml"));
  CHECK(error.loc.line == 1);
  CHECK_THAT(error.message,
             Catch::Contains("nesting deeper than the parser allows"));
}

TEST_CASE("CRLF line ends read the same values and report the same places",
          "[frontend]") {
  auto crlf = [](std::string text) {
    for (size_t at = text.find('\n'); at != std::string::npos;
         at = text.find('\n', at + 2))
      text.insert(at, "\r");
    return text;
  };
  ConfigResult good = readConfigString(crlf(tinyModel), "w.yaml");
  REQUIRE(good.ok());
  CHECK(good.config->model.name.value == "t");
  CHECK(good.config->model.vocabSize.value == 128);
  ConfigError error = errorOf(readConfigString(
      crlf(tinyWith("  hidden_size", "  hiden_size: 64")), "w.yaml"));
  CHECK(error.format() == "w.yaml:3:3: unknown key 'hiden_size' in model "
                          "(did you mean 'hidden_size'?)");
  ConfigError stray = errorOf(readConfigString(crlf(", model\n"), "w.yaml"));
  CHECK(stray.format() ==
        "w.yaml:1:1: invalid YAML: unexpected ',' where a document should "
        "start");
}

TEST_CASE("a trailing document marker is not a second document", "[frontend]") {
  ConfigResult result = readConfigString(tinyModel + "---\n", "t.yaml");
  INFO((result.error ? result.error->format() : ""));
  CHECK(result.ok());
}

TEST_CASE("errors format as FILE:LINE:COL: message", "[frontend]") {
  ConfigError error = errorOf(readConfigString(
      tinyWith("  hidden_size", "  hiden_size: 64"), "models/x.yaml"));
  CHECK(error.format() == "models/x.yaml:3:3: unknown key 'hiden_size' in "
                          "model (did you mean 'hidden_size'?)");
}

TEST_CASE("did-you-mean only offers plausible typos", "[frontend]") {
  CHECK(editDistance("hiden_size", "hidden_size") == 1);
  CHECK(editDistance("hidden_szie", "hidden_size") == 1);
  CHECK(editDistance("kitten", "sitting") == 3);
  const std::string_view names[] = {"float32", "bfloat16"};
  CHECK(didYouMean("bfloat61", names) == " (did you mean 'bfloat16'?)");
  CHECK(didYouMean("FLOAT32", names) == " (did you mean 'float32'?)");
  CHECK(didYouMean("int8", names).empty());
}

TEST_CASE("truncated or corrupted files never escape as crashes",
          "[frontend]") {
  std::ifstream in(modelsDir + "minimind.yaml", std::ios::binary);
  std::string original((std::istreambuf_iterator<char>(in)), {});
  REQUIRE(original.size() > 100);
  auto checkOne = [](const std::string &text) {
    ConfigResult result = readConfigString(text, "fuzz.yaml");
    REQUIRE(result.ok() != result.error.has_value());
    if (result.error) {
      CHECK(result.error->loc.line >= 1);
      CHECK_FALSE(result.error->message.empty());
    }
  };
  for (size_t length = 0; length <= original.size(); ++length)
    checkOne(original.substr(0, length));
  std::mt19937 rng(7);
  std::uniform_int_distribution<size_t> position(0, original.size() - 1);
  std::uniform_int_distribution<int> byte(0, 255);
  for (int trial = 0; trial < 2000; ++trial) {
    std::string text = original;
    for (int flips = 0; flips < 1 + trial % 4; ++flips)
      text[position(rng)] = static_cast<char>(byte(rng));
    checkOne(text);
  }
}
