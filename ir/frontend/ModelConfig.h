//===- ModelConfig.h - model and run config from YAML -----------*- C++ -*-===//
// defines: SourceLoc, Field, ModelConfig, ScheduleConfig, OptimizerConfig,
//          RunConfig, Config,
//          ConfigError, ConfigResult, readConfigFile, readConfigString,
//          defaultIntermediateSize
//
// The frontend's first step: YAML in, plain structs out, with the place in
// the file that each value came from, so that a later pass can point an
// error (say "tp (3) must divide num_key_value_heads (4)") at the line the
// user wrote. Depends on yaml-cpp only, so it is cheap to test.
//
//   ConfigResult r = readConfigFile("models/tiny.yaml");
//   if (!r.ok()) { fprintf(stderr, "sharc: error: %s\n",
//                          r.error->format().c_str()); return 2; }
//   int64_t hidden = r.config->model.hiddenSize.value;
//
// Where a field was not written, it holds its default and the location of
// the key that determines it: head_dim that of num_attention_heads,
// intermediate_size that of hidden_size, every other field that of its
// section's key (or of the document when the section is absent).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace sharc::frontend {

/// A place in a YAML file. line and col count from 1; line 0 means the file
/// as a whole (it could not be opened or read).
struct SourceLoc {
  std::string file;
  int line = 0;
  int col = 0;

  bool operator==(const SourceLoc &other) const = default;
};

template <typename T> struct Field {
  T value{};
  SourceLoc loc;
};

/// `model:`: a dense decoder-only Transformer (MiniMind's shape).
struct ModelConfig {
  Field<std::string> name;
  Field<int64_t> hiddenSize, numLayers, numHeads, numKvHeads, headDim,
      intermediateSize, vocabSize;
  Field<double> ropeTheta, rmsNormEps, initStd;
  Field<bool> tieWordEmbeddings;
  SourceLoc loc; ///< the `model` key
};

/// `run.optimizer.schedule:`: the learning rate over the steps, warmup
/// then a decay to min_lr (planner/plan/Plan.h's LrSchedule has the math).
/// Without the section, lr holds at every step.
struct ScheduleConfig {
  Field<std::string> decay; ///< "constant", "linear" or "cosine"
  Field<int64_t> warmupSteps, totalSteps;
  Field<double> minLr; ///< absolute; unset (loc.line 0): lr, no decay
  SourceLoc loc;
};

/// `run.optimizer:`: AdamW hyperparameters, and gradient clipping: every
/// update scales the step's gradients by min(1, gradClip / global L2 norm),
/// torch.nn.utils.clip_grad_norm_'s rule; 0 (the default) clips nothing.
struct OptimizerConfig {
  Field<double> lr, beta1, beta2, eps, weightDecay, gradClip;
  ScheduleConfig schedule;
  SourceLoc loc;
};

/// `run:`: what one training step looks like.
struct RunConfig {
  Field<int64_t> seqLen, microBatchSize, numMicrobatches, seed;
  /// "float32", "bfloat16" (pure bf16: weights, gradients, moments) or
  /// "bf16-mixed" (bf16 weights and gradients, fp32 master weights and
  /// moments in the AdamW update).
  Field<std::string> dtype;
  OptimizerConfig optimizer;
  SourceLoc loc;
};

struct Config {
  ModelConfig model;
  RunConfig run;
};

struct ConfigError {
  SourceLoc loc;
  std::string message;

  /// "FILE:LINE:COL: message", or "FILE: message" when line is 0.
  std::string format() const;
};

/// Exactly one of config and error is set.
struct ConfigResult {
  std::optional<Config> config;
  std::optional<ConfigError> error;

  bool ok() const { return config.has_value(); }
};

/// Reads the model file (a `model:` section and optionally `run:`) and, when
/// runPath is not empty, a run file holding only `run:`, whose fields
/// override the model file's one by one. Never throws.
ConfigResult readConfigFile(const std::string &modelPath,
                            const std::string &runPath = "");

/// Reads one YAML document given as text; fileName only labels locations.
ConfigResult readConfigString(const std::string &text,
                              const std::string &fileName);

/// MiniMind's rule: ceil(hiddenSize * pi / 64) * 64, e.g. 2432 for 768.
int64_t defaultIntermediateSize(int64_t hiddenSize);

} // namespace sharc::frontend
