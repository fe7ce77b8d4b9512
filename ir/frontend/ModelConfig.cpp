//===- ModelConfig.cpp - model and run configuration read from YAML -------===//
//
// The schema: which keys each section has, their defaults and the checks
// that need more than one field. Conversion of single values lives in
// ConfigSection, the wording of encoding and syntax errors in
// ConfigDiagnostics.

#include "ir/frontend/ModelConfig.h"
#include "ir/frontend/ConfigDiagnostics.h"
#include "ir/frontend/ConfigSection.h"

#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <numbers>
#include <vector>

namespace sharc::frontend {

std::string ConfigError::format() const {
  if (loc.line <= 0)
    return loc.file + ": " + message;
  return loc.file + ":" + std::to_string(loc.line) + ":" +
         std::to_string(loc.col) + ": " + message;
}

int64_t defaultIntermediateSize(int64_t hiddenSize) {
  double scaled = static_cast<double>(hiddenSize) * std::numbers::pi / 64.0;
  return static_cast<int64_t>(std::ceil(scaled)) * 64;
}

namespace {

constexpr std::array<std::string_view, 12> modelKeys = {
    "name",
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "intermediate_size",
    "vocab_size",
    "rope_theta",
    "rms_norm_eps",
    "tie_word_embeddings",
    "init_std",
};
constexpr std::array<std::string_view, 6> requiredModelKeys = {
    "name",
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "vocab_size",
};
constexpr std::array<std::string_view, 6> runKeys = {
    "seq_len", "micro_batch_size", "num_microbatches", "dtype",
    "seed",    "optimizer",
};
constexpr std::array<std::string_view, 6> optimizerKeys = {
    "lr", "betas", "eps", "weight_decay", "grad_clip", "schedule",
};
constexpr std::array<std::string_view, 4> scheduleKeys = {
    "warmup_steps",
    "decay",
    "total_steps",
    "min_lr",
};
constexpr std::array<std::string_view, 3> decayNames = {"constant", "linear",
                                                        "cosine"};
// A billion steps is far past any run (sharc-run takes at most 10^8).
constexpr IntBounds stepBounds{0, 1'000'000'000};
constexpr std::array<std::string_view, 3> dtypeNames = {"float32", "bfloat16",
                                                        "bf16-mixed"};

// Sizes stay within int32 so that products of two of them (hidden * vocab,
// seq * batch) cannot overflow the int64 shapes later passes compute.
constexpr int64_t maxSize = std::numeric_limits<int32_t>::max();
constexpr IntBounds sizeBounds{1, maxSize};

ConfigError errorAt(SourceLoc loc, std::string message) {
  return ConfigError{std::move(loc), std::move(message)};
}

/// Parses text into its single document, after rejecting bytes that are
/// not YAML text. expected names what the document should hold.
MaybeError parseDocument(const std::string &text, const std::string &file,
                         const std::string &expected, YAML::Node &root) {
  if (MaybeError error = findEncodingError(text, file))
    return error;
  std::vector<YAML::Node> documents;
  try {
    if (std::optional<YAML::Mark> stuck = findStuckParser(text)) {
      std::string found = static_cast<size_t>(stuck->pos) < text.size()
                              ? "'" + text.substr(stuck->pos, 1) + "'"
                              : "the end of the file";
      return errorAt(locFromMark(file, *stuck),
                     "invalid YAML: unexpected " + found +
                         " where a document should start");
    }
    documents = YAML::LoadAll(text);
  } catch (const YAML::DeepRecursion &e) {
    return errorAt(locFromMark(file, e.mark), "invalid YAML: nesting deeper "
                                              "than the parser allows");
  } catch (const YAML::Exception &e) {
    return errorAt(locFromMark(file, e.mark), "invalid YAML: " + e.msg);
  }
  // A stray "---" at the end makes an empty document; only content counts.
  std::erase_if(documents,
                [](const YAML::Node &document) { return document.IsNull(); });
  if (documents.empty())
    return errorAt(SourceLoc{file, 1, 1},
                   "empty document (expected " + expected + ")");
  if (documents.size() > 1)
    return errorAt(locFromMark(file, documents[1].Mark()),
                   "expected one YAML document, found " +
                       std::to_string(documents.size()));
  root = documents[0];
  if (!root.IsMap())
    return errorAt(locFromMark(file, root.Mark()), "top level must be " +
                                                       expected + ", got " +
                                                       describeNode(root));
  return std::nullopt;
}

/// The sub-section `name` of parent (absent: an empty section at parent's
/// place), with its keys checked.
MaybeError openSection(const Section &parent, std::string_view name,
                       std::string where,
                       std::span<const std::string_view> knownKeys,
                       Section &section) {
  section.file = parent.file;
  section.where = std::move(where);
  section.loc = parent.loc;
  const SectionEntry *entry = parent.find(name);
  if (!entry)
    return std::nullopt;
  section.loc = locFromMark(parent.file, entry->keyNode.Mark());
  return collectSection(entry->value, std::string(name), knownKeys, section);
}

std::string str(int64_t value) { return std::to_string(value); }

/// The checks that relate fields; each error points at the field a user
/// would most likely change.
MaybeError checkModelShape(ModelConfig &model, bool hasHeadDim) {
  if (model.numHeads.value % model.numKvHeads.value != 0)
    return errorAt(model.numKvHeads.loc,
                   "num_attention_heads (" + str(model.numHeads.value) +
                       ") must be divisible by num_key_value_heads (" +
                       str(model.numKvHeads.value) + ")");
  if (!hasHeadDim) {
    if (model.hiddenSize.value % model.numHeads.value != 0)
      return errorAt(model.numHeads.loc,
                     "hidden_size (" + str(model.hiddenSize.value) +
                         ") must be divisible by num_attention_heads (" +
                         str(model.numHeads.value) +
                         ") when head_dim is omitted");
    model.headDim = {model.hiddenSize.value / model.numHeads.value,
                     model.numHeads.loc};
  }
  // Rotary embeddings rotate pairs of channels.
  if (model.headDim.value % 2 != 0)
    return errorAt(
        model.headDim.loc,
        "head_dim (" + str(model.headDim.value) +
            (hasHeadDim ? "" : ", hidden_size / num_attention_heads") +
            ") must be even for rotary embeddings");
  return std::nullopt;
}

MaybeError readModel(const Section &top, ModelConfig &model) {
  Section section;
  if (MaybeError error =
          openSection(top, "model", "in model", modelKeys, section))
    return error;
  if (MaybeError error = requireKeys(section, requiredModelKeys))
    return error;
  model.loc = section.loc;
  model.ropeTheta = {1.0e6, section.loc};
  model.rmsNormEps = {1.0e-6, section.loc};
  model.initStd = {0.02, section.loc};
  model.tieWordEmbeddings = {false, section.loc};
  MaybeError error = readString(section, "name", model.name);
  if (!error && model.name.value.empty())
    error = errorAt(model.name.loc, "name must not be empty");
  for (auto [key, field] : {std::pair{"hidden_size", &model.hiddenSize},
                            {"num_hidden_layers", &model.numLayers},
                            {"num_attention_heads", &model.numHeads},
                            {"num_key_value_heads", &model.numKvHeads},
                            {"head_dim", &model.headDim},
                            {"intermediate_size", &model.intermediateSize},
                            {"vocab_size", &model.vocabSize}})
    if (!error)
      error = readInt(section, key, sizeBounds, *field);
  if (!error)
    error = readDouble(section, "rope_theta", DoubleBounds::Positive,
                       model.ropeTheta);
  if (!error)
    error = readDouble(section, "rms_norm_eps", DoubleBounds::Positive,
                       model.rmsNormEps);
  if (!error)
    error = readBool(section, "tie_word_embeddings", model.tieWordEmbeddings);
  if (!error)
    error =
        readDouble(section, "init_std", DoubleBounds::Positive, model.initStd);
  if (error)
    return error;
  if (!section.find("intermediate_size"))
    model.intermediateSize = {defaultIntermediateSize(model.hiddenSize.value),
                              model.hiddenSize.loc};
  return checkModelShape(model, section.find("head_dim") != nullptr);
}

/// Defaults follow their section: fields still at `from` (not written by
/// the user) move to `to`, the section that now governs them.
void moveDefaults(RunConfig &run, const SourceLoc &from, const SourceLoc &to) {
  for (Field<int64_t> *field :
       {&run.seqLen, &run.microBatchSize, &run.numMicrobatches, &run.seed})
    if (field->loc == from)
      field->loc = to;
  if (run.dtype.loc == from)
    run.dtype.loc = to;
  run.loc = to;
}

void moveOptimizerDefaults(OptimizerConfig &optimizer, const SourceLoc &from,
                           const SourceLoc &to) {
  for (Field<double> *field :
       {&optimizer.lr, &optimizer.beta1, &optimizer.beta2, &optimizer.eps,
        &optimizer.weightDecay, &optimizer.gradClip})
    if (field->loc == from)
      field->loc = to;
  optimizer.loc = to;
}

RunConfig defaultRun(const SourceLoc &loc) {
  RunConfig run;
  run.loc = loc;
  run.seqLen = {128, loc};
  run.microBatchSize = {2, loc};
  run.numMicrobatches = {1, loc};
  run.seed = {42, loc};
  run.dtype = {"float32", loc};
  OptimizerConfig &optimizer = run.optimizer;
  optimizer.loc = loc;
  optimizer.lr = {5.0e-4, loc};
  optimizer.beta1 = {0.9, loc};
  optimizer.beta2 = {0.999, loc};
  optimizer.eps = {1.0e-8, loc};
  optimizer.weightDecay = {0.01, loc};
  optimizer.gradClip = {0.0, loc};
  optimizer.schedule.decay = {"constant", loc};
  optimizer.schedule.loc = loc;
  return run;
}

MaybeError readBetas(const Section &section, OptimizerConfig &optimizer) {
  const SectionEntry *entry = section.find("betas");
  if (!entry)
    return std::nullopt;
  const YAML::Node &node = entry->value;
  SourceLoc loc = section.valueLoc(*entry);
  if (!node.IsSequence())
    return errorAt(loc, "betas must be a list of two numbers, got " +
                            describeNode(node));
  if (node.size() != 2)
    return errorAt(loc, "betas must be a list of two numbers, got " +
                            std::to_string(node.size()));
  Field<double> *betas[] = {&optimizer.beta1, &optimizer.beta2};
  for (size_t i = 0; i < 2; ++i) {
    const YAML::Node element = node[i];
    SourceLoc elementLoc =
        element.IsNull() ? loc : locFromMark(section.file, element.Mark());
    if (MaybeError error =
            parseDouble(element, elementLoc, "betas[" + std::to_string(i) + "]",
                        DoubleBounds::UnitInterval, *betas[i]))
      return error;
  }
  return std::nullopt;
}

/// `schedule:` inside an optimizer section, applied field by field like
/// every run key; what relates the fields is checkSchedule's.
MaybeError readSchedule(const Section &optimizer, ScheduleConfig &schedule) {
  if (!optimizer.find("schedule"))
    return std::nullopt;
  Section section;
  if (MaybeError error =
          openSection(optimizer, "schedule", "in run.optimizer.schedule",
                      scheduleKeys, section))
    return error;
  schedule.loc = section.loc;
  MaybeError error = readString(section, "decay", schedule.decay);
  if (!error && section.find("decay") &&
      std::find(decayNames.begin(), decayNames.end(), schedule.decay.value) ==
          decayNames.end()) {
    std::string hint = didYouMean(schedule.decay.value, decayNames);
    if (hint.empty())
      hint = " (expected constant, linear or cosine)";
    error = errorAt(schedule.decay.loc,
                    "unknown decay '" + schedule.decay.value + "'" + hint);
  }
  if (!error)
    error = readInt(section, "warmup_steps", stepBounds, schedule.warmupSteps);
  if (!error)
    error = readInt(section, "total_steps", IntBounds{1, stepBounds.max},
                    schedule.totalSteps);
  if (!error)
    error = readDouble(section, "min_lr", DoubleBounds::NonNegative,
                       schedule.minLr);
  return error;
}

MaybeError readOptimizer(const Section &run, OptimizerConfig &optimizer) {
  Section section;
  if (MaybeError error = openSection(run, "optimizer", "in run.optimizer",
                                     optimizerKeys, section))
    return error;
  if (!run.find("optimizer"))
    return std::nullopt;
  moveOptimizerDefaults(optimizer, optimizer.loc, section.loc);
  MaybeError error =
      readDouble(section, "lr", DoubleBounds::NonNegative, optimizer.lr);
  if (!error)
    error = readBetas(section, optimizer);
  if (!error)
    error =
        readDouble(section, "eps", DoubleBounds::NonNegative, optimizer.eps);
  if (!error)
    error = readDouble(section, "weight_decay", DoubleBounds::NonNegative,
                       optimizer.weightDecay);
  if (!error)
    error = readDouble(section, "grad_clip", DoubleBounds::NonNegative,
                       optimizer.gradClip);
  if (!error)
    error = readSchedule(section, optimizer.schedule);
  return error;
}

/// The schedule's fields against each other and the learning rate, once
/// the model file and the run file have both been applied.
MaybeError checkSchedule(const OptimizerConfig &optimizer) {
  const ScheduleConfig &schedule = optimizer.schedule;
  bool decays = schedule.decay.value != "constant";
  if (decays && schedule.totalSteps.loc.line == 0)
    return errorAt(schedule.loc, "missing key 'total_steps' in "
                                 "run.optimizer.schedule (where the " +
                                     schedule.decay.value + " decay ends)");
  if (decays && schedule.totalSteps.value <= schedule.warmupSteps.value)
    return errorAt(schedule.totalSteps.loc,
                   "total_steps (" + str(schedule.totalSteps.value) +
                       ") must be greater than warmup_steps (" +
                       str(schedule.warmupSteps.value) + ")");
  if (schedule.minLr.loc.line != 0 && !decays)
    return errorAt(schedule.minLr.loc,
                   "min_lr needs a decay ('linear' or 'cosine') to reach it");
  if (schedule.minLr.loc.line != 0 && schedule.minLr.value > optimizer.lr.value)
    return errorAt(schedule.minLr.loc,
                   "min_lr (" + std::to_string(schedule.minLr.value) +
                       ") must not exceed lr (" +
                       std::to_string(optimizer.lr.value) + ")");
  return std::nullopt;
}

MaybeError readDtype(const Section &section, Field<std::string> &dtype) {
  if (MaybeError error = readString(section, "dtype", dtype))
    return error;
  for (std::string_view name : dtypeNames)
    if (dtype.value == name)
      return std::nullopt;
  std::string hint = didYouMean(dtype.value, dtypeNames);
  if (hint.empty())
    hint = " (expected 'float32', 'bfloat16' or 'bf16-mixed')";
  return errorAt(dtype.loc, "unknown dtype '" + dtype.value + "'" + hint);
}

/// Applies top's `run:` over run, field by field; absent: nothing changes.
MaybeError applyRun(const Section &top, RunConfig &run) {
  if (!top.find("run"))
    return std::nullopt;
  Section section;
  if (MaybeError error = openSection(top, "run", "in run", runKeys, section))
    return error;
  SourceLoc oldLoc = run.loc;
  if (run.optimizer.loc == oldLoc)
    moveOptimizerDefaults(run.optimizer, oldLoc, section.loc);
  moveDefaults(run, oldLoc, section.loc);
  MaybeError error = readInt(
      section, "seq_len",
      IntBounds{2, maxSize, "the shifted loss needs two tokens"}, run.seqLen);
  if (!error)
    error =
        readInt(section, "micro_batch_size", sizeBounds, run.microBatchSize);
  if (!error)
    error =
        readInt(section, "num_microbatches", sizeBounds, run.numMicrobatches);
  if (!error)
    error = readDtype(section, run.dtype);
  if (!error)
    error =
        readInt(section, "seed",
                IntBounds{0, std::numeric_limits<int64_t>::max()}, run.seed);
  if (!error)
    error = readOptimizer(section, run.optimizer);
  return error;
}

/// The top-level mapping of a file; a run file may hold only `run:`.
MaybeError openTop(const std::string &text, const std::string &file,
                   bool isRunFile, Section &top) {
  std::string expected = isRunFile ? "a mapping with a 'run' section"
                                   : "a mapping with a 'model' section";
  YAML::Node root;
  if (MaybeError error = parseDocument(text, file, expected, root))
    return error;
  top.file = file;
  top.where = isRunFile ? "at top level of a run file" : "at top level";
  top.loc = locFromMark(file, root.Mark());
  constexpr std::array<std::string_view, 2> modelFileKeys = {"model", "run"};
  constexpr std::array<std::string_view, 2> runFileKeys = {"run", "model"};
  std::span<const std::string_view> known = modelFileKeys;
  if (isRunFile)
    known = runFileKeys;
  if (MaybeError error = collectSection(root, "top level", known, top))
    return error;
  if (const SectionEntry *model = top.find("model"); model && isRunFile)
    return errorAt(locFromMark(file, model->keyNode.Mark()),
                   "unexpected section 'model' in a run file (the model "
                   "comes from the model file)");
  std::string_view required = isRunFile ? "run" : "model";
  if (!top.find(required))
    return errorAt(top.loc,
                   "missing required section '" + std::string(required) + "'");
  return std::nullopt;
}

ConfigResult fail(ConfigError error) {
  return ConfigResult{std::nullopt, std::move(error)};
}

/// Reads the whole file, refusing anything too large to be a configuration
/// (a wrong path to a checkpoint should fail fast, not fill memory).
MaybeError readFileText(const std::string &path, std::string &text) {
  constexpr size_t maxBytes = size_t(1) << 20;
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    return errorAt(SourceLoc{path}, "cannot open file: it is a directory");
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return errorAt(SourceLoc{path},
                   std::string("cannot open file: ") + std::strerror(errno));
  char buffer[4096];
  while (in.read(buffer, sizeof(buffer)) || in.gcount() > 0) {
    text.append(buffer, static_cast<size_t>(in.gcount()));
    if (text.size() > maxBytes)
      return errorAt(SourceLoc{path},
                     "file is larger than 1 MiB; not a configuration file");
  }
  if (in.bad())
    return errorAt(SourceLoc{path},
                   std::string("cannot read file: ") + std::strerror(errno));
  return std::nullopt;
}

/// Byte counts of the dense model must stay far inside int64, or the
/// planner's sizes wrap (a report of negative MiB, a plan that lies). Counted
/// in long double, so the check itself cannot overflow: the parameters with
/// their two AdamW moments (and master), and the largest activation of a
/// step.
MaybeError checkByteCounts(const Config &config) {
  using Wide = long double;
  auto bytesText = [](Wide bytes) {
    char text[32];
    std::snprintf(text, sizeof(text), "%.2e", static_cast<double>(bytes));
    return std::string(text);
  };
  const ModelConfig &m = config.model;
  const Wide kLimit = 0x1p60L; // 1 EiB: no plan of any machine comes near
  Wide hidden = m.hiddenSize.value, vocab = m.vocabSize.value;
  Wide query = Wide(m.numHeads.value) * m.headDim.value;
  Wide keyValue = Wide(m.numKvHeads.value) * m.headDim.value;
  Wide perLayer = hidden * (2 * query + 2 * keyValue) +
                  3 * hidden * m.intermediateSize.value;
  // f32 weights and two moments: 12 bytes an element; bf16-mixed's bf16
  // weights, f32 master and moments: 14.
  Wide bytesPerElement = config.run.dtype.value == "bf16-mixed" ? 14 : 12;
  Wide paramBytes = bytesPerElement *
                    (2 * vocab * hidden + Wide(m.numLayers.value) * perLayer);
  if (paramBytes > kLimit)
    return errorAt(m.hiddenSize.loc,
                   "the model's parameters and AdamW moments need about " +
                       bytesText(paramBytes) +
                       " bytes, more than the 2^60 sharc can plan");
  const RunConfig &run = config.run;
  Wide widest = std::max({vocab, query, Wide(m.intermediateSize.value)});
  Wide activationBytes = 4 * Wide(run.seqLen.value) * run.microBatchSize.value *
                         run.numMicrobatches.value * widest;
  if (activationBytes > kLimit)
    return errorAt(run.seqLen.loc,
                   "one activation of seq_len x batch x " +
                       std::to_string(static_cast<int64_t>(widest)) +
                       " elements needs about " + bytesText(activationBytes) +
                       " bytes, more than the 2^60 sharc can plan");
  return std::nullopt;
}

ConfigResult readConfigTexts(const std::string &modelText,
                             const std::string &modelFile,
                             const std::string *runText,
                             const std::string &runFile) {
  Section top;
  if (MaybeError error = openTop(modelText, modelFile, false, top))
    return fail(*error);
  Config config;
  if (MaybeError error = readModel(top, config.model))
    return fail(*error);
  config.run = defaultRun(top.loc);
  if (MaybeError error = applyRun(top, config.run))
    return fail(*error);
  if (runText) {
    Section runTop;
    if (MaybeError error = openTop(*runText, runFile, true, runTop))
      return fail(*error);
    if (MaybeError error = applyRun(runTop, config.run))
      return fail(*error);
  }
  if (MaybeError error = checkByteCounts(config))
    return fail(*error);
  if (MaybeError error = checkSchedule(config.run.optimizer))
    return fail(*error);
  return ConfigResult{std::move(config), std::nullopt};
}

/// yaml-cpp throws; nothing the readers call should, but an exception from
/// a library corner must still become an error rather than a crash.
ConfigResult readGuarded(const std::string &modelText,
                         const std::string &modelFile,
                         const std::string *runText,
                         const std::string &runFile) {
  try {
    return readConfigTexts(modelText, modelFile, runText, runFile);
  } catch (const YAML::Exception &e) {
    return fail(errorAt(locFromMark(modelFile, e.mark),
                        "cannot read configuration: " + e.msg));
  } catch (const std::exception &e) {
    return fail(errorAt(SourceLoc{modelFile},
                        std::string("cannot read configuration: ") + e.what()));
  }
}

} // namespace

ConfigResult readConfigFile(const std::string &modelPath,
                            const std::string &runPath) {
  std::string modelText, runText;
  if (MaybeError error = readFileText(modelPath, modelText))
    return fail(*error);
  if (runPath.empty())
    return readGuarded(modelText, modelPath, nullptr, "");
  if (MaybeError error = readFileText(runPath, runText))
    return fail(*error);
  return readGuarded(modelText, modelPath, &runText, runPath);
}

ConfigResult readConfigString(const std::string &text,
                              const std::string &fileName) {
  return readGuarded(text, fileName, nullptr, "");
}

} // namespace sharc::frontend
