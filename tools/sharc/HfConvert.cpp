//===- HfConvert.cpp - Hugging Face Qwen3 checkpoints out and in ----------===//

#include "tools/sharc/HfConvert.h"
#include "tools/sharc/HfWeights.h"

#include "ir/frontend/ModelConfig.h"
#include "planner/plan/FileText.h"
#include "planner/plan/SafeTensors.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <charconv>
#include <cstdio>
#include <filesystem>
#include <map>
#include <vector>

using namespace sharc;

namespace {

constexpr const char *kModelPrefix = "model.";

struct ParamShape {
  std::string name; ///< sharc's
  std::vector<int64_t> shape;
};

/// What the model file says the checkpoint holds, independent of any plan.
std::vector<ParamShape> expectedParams(const frontend::ModelConfig &model) {
  int64_t hidden = model.hiddenSize.value, vocab = model.vocabSize.value;
  int64_t headDim = model.headDim.value;
  int64_t qOut = model.numHeads.value * headDim;
  int64_t kvOut = model.numKvHeads.value * headDim;
  int64_t inter = model.intermediateSize.value;
  std::vector<ParamShape> params{{"embed_tokens.weight", {vocab, hidden}}};
  for (int64_t l = 0; l < model.numLayers.value; ++l) {
    std::string layer = "layers." + std::to_string(l) + ".";
    std::string attn = layer + "self_attn.", mlp = layer + "mlp.";
    params.push_back({layer + "input_layernorm.weight", {hidden}});
    params.push_back({attn + "q_proj.weight", {qOut, hidden}});
    params.push_back({attn + "k_proj.weight", {kvOut, hidden}});
    params.push_back({attn + "v_proj.weight", {kvOut, hidden}});
    params.push_back({attn + "q_norm.weight", {headDim}});
    params.push_back({attn + "k_norm.weight", {headDim}});
    params.push_back({attn + "o_proj.weight", {hidden, qOut}});
    params.push_back({layer + "post_attention_layernorm.weight", {hidden}});
    params.push_back({mlp + "gate_proj.weight", {inter, hidden}});
    params.push_back({mlp + "up_proj.weight", {inter, hidden}});
    params.push_back({mlp + "down_proj.weight", {hidden, inter}});
  }
  params.push_back({"norm.weight", {hidden}});
  if (!model.tieWordEmbeddings.value)
    params.push_back({"lm_head.weight", {vocab, hidden}});
  return params;
}

std::string shapeText(const std::vector<int64_t> &shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    text += (i ? "," : "") + std::to_string(shape[i]);
  return text + "]";
}

/// Shortest text that reads back as the same double (YAML and JSON alike).
std::string exactDouble(double value) {
  char text[64];
  auto result = std::to_chars(text, text + sizeof(text), value);
  std::string out(text, result.ptr);
  // A whole number stays a float for YAML readers: 1e6 would be fine, but
  // "1000000" reads as an integer.
  if (out.find_first_of(".eEn") == std::string::npos)
    out += ".0";
  return out;
}

llvm::json::Object hfConfig(const frontend::Config &config, DType dtype) {
  const frontend::ModelConfig &model = config.model;
  double theta = model.ropeTheta.value;
  return llvm::json::Object{
      {"architectures", llvm::json::Array{"Qwen3ForCausalLM"}},
      {"model_type", "qwen3"},
      {"hidden_size", model.hiddenSize.value},
      {"intermediate_size", model.intermediateSize.value},
      {"num_hidden_layers", model.numLayers.value},
      {"num_attention_heads", model.numHeads.value},
      {"num_key_value_heads", model.numKvHeads.value},
      {"head_dim", model.headDim.value},
      {"vocab_size", model.vocabSize.value},
      {"hidden_act", "silu"},
      {"rms_norm_eps", model.rmsNormEps.value},
      // transformers 5 reads rope_parameters; 4.x reads rope_theta.
      {"rope_theta", theta},
      {"rope_parameters",
       llvm::json::Object{{"rope_type", "default"}, {"rope_theta", theta}}},
      {"rope_scaling", nullptr},
      {"tie_word_embeddings", model.tieWordEmbeddings.value},
      {"attention_bias", false},
      {"attention_dropout", 0.0},
      {"use_sliding_window", false},
      {"sliding_window", nullptr},
      {"max_window_layers", model.numLayers.value},
      // MiniMind's context and special tokens (scripts/prepare-data.py
      // trains <|endoftext|>, <|im_start|>, <|im_end|> as ids 0, 1, 2).
      {"max_position_embeddings", 32768},
      {"bos_token_id", 1},
      {"eos_token_id", 2},
      {"initializer_range", model.initStd.value},
      {"use_cache", true},
      {"torch_dtype", dtype == DType::BF16 ? "bfloat16" : "float32"},
      {"dtype", dtype == DType::BF16 ? "bfloat16" : "float32"},
  };
}

Status writeJson(const std::string &path, const llvm::json::Object &object) {
  std::string text;
  llvm::raw_string_ostream out(text);
  out << llvm::formatv("{0:2}", llvm::json::Value(llvm::json::Object(object)))
      << "\n";
  out.flush();
  return writeFileAtomically(path, {text}, "config");
}

Status makeDirectory(const std::string &dir) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error || !std::filesystem::is_directory(dir))
    return Status::invalidInput("cannot create directory '" + dir +
                                "': " + error.message());
  return Status::ok();
}

} // namespace

std::string sharc::hfTensorName(const std::string &sharcName) {
  return sharcName == "lm_head.weight" ? sharcName : kModelPrefix + sharcName;
}

std::string sharc::sharcTensorName(const std::string &hfName) {
  if (hfName == "lm_head.weight")
    return hfName;
  std::string prefix = kModelPrefix;
  if (hfName.compare(0, prefix.size(), prefix) != 0)
    return "";
  return hfName.substr(prefix.size());
}

Status sharc::exportHf(const std::string &checkpointPath,
                       const std::string &modelPath, const std::string &outDir,
                       const std::string &tokenizerPath) {
  frontend::ConfigResult config = frontend::readConfigFile(modelPath);
  if (!config.ok())
    return Status::invalidInput(config.error->format());
  // The checkpoint is read a tensor at a time, and its optimizer state
  // (two thirds of a bf16-mixed file) not at all.
  auto checkpoint = plan::SafeTensorsReader::open(checkpointPath);
  if (!checkpoint)
    return checkpoint.status();
  std::vector<ParamShape> params = expectedParams(config.config->model);
  std::vector<plan::TensorSpec> specs;
  DType dtype = DType::F32;
  for (const ParamShape &param : params) {
    const plan::TensorSpec *tensor = (*checkpoint)->find(param.name);
    if (!tensor)
      return Status::invalidInput(checkpointPath + ": no tensor '" +
                                  param.name + "', which " + modelPath +
                                  " has (a checkpoint of another model?)");
    if (tensor->shape != param.shape)
      return Status::invalidInput(checkpointPath + ": tensor '" + param.name +
                                  "' is " + shapeText(tensor->shape) + " but " +
                                  modelPath + " makes it " +
                                  shapeText(param.shape));
    if (tensor->dtype != DType::F32 && tensor->dtype != DType::BF16)
      return Status::invalidInput(checkpointPath + ": tensor '" + param.name +
                                  "' is neither f32 nor bf16");
    dtype = tensor->dtype;
    specs.push_back({hfTensorName(param.name), tensor->dtype, tensor->shape});
  }
  std::string tokenizer;
  if (!tokenizerPath.empty()) {
    auto text = readWholeFile(tokenizerPath, "tokenizer");
    if (!text)
      return text.status();
    tokenizer = std::move(*text);
  }
  SHARC_TRY(makeDirectory(outDir));
  auto writer = plan::SafeTensorsWriter::create(
      outDir + "/model.safetensors",
      {{"format", "pt"}}, // what transformers asks of a torch file
      specs);
  if (!writer)
    return writer.status();
  plan::NamedTensor tensor;
  for (const plan::TensorSpec &spec : (*writer)->order()) {
    SHARC_TRY((*checkpoint)->readInto(sharcTensorName(spec.name), tensor));
    tensor.name = spec.name;
    SHARC_TRY((*writer)->write(tensor));
  }
  SHARC_TRY((*writer)->commit());
  if (!tokenizerPath.empty()) {
    SHARC_TRY(writeFileAtomically(outDir + "/tokenizer.json", {tokenizer},
                                  "tokenizer"));
    // What AutoTokenizer needs beside tokenizer.json; the special tokens
    // are prepare-data.py's (MiniMind's), whose ids config.json names.
    SHARC_TRY(writeJson(
        outDir + "/tokenizer_config.json",
        llvm::json::Object{{"tokenizer_class", "PreTrainedTokenizerFast"},
                           {"bos_token", "<|im_start|>"},
                           {"eos_token", "<|im_end|>"},
                           {"unk_token", "<|endoftext|>"},
                           {"pad_token", "<|endoftext|>"},
                           {"model_max_length", 32768}}));
  }
  return writeJson(outDir + "/config.json", hfConfig(*config.config, dtype));
}

namespace {

/// config.json's fields, each checked for its kind, with the file in every
/// message.
class HfConfigReader {
public:
  HfConfigReader(const llvm::json::Object &object, std::string path)
      : object_(object), path_(std::move(path)) {}

  Result<int64_t> integer(llvm::StringRef key) const {
    const llvm::json::Value *value = object_.get(key);
    if (!value)
      return bad("missing key '" + key.str() + "'");
    std::optional<int64_t> number = value->getAsInteger();
    if (!number || *number < 1)
      return bad("'" + key.str() + "' must be a positive integer");
    return *number;
  }

  Result<double> number(llvm::StringRef key, double fallback) const {
    const llvm::json::Value *value = object_.get(key);
    if (!value || value->kind() == llvm::json::Value::Null)
      return fallback;
    std::optional<double> number = value->getAsNumber();
    if (!number || !(*number > 0))
      return bad("'" + key.str() + "' must be a positive number");
    return *number;
  }

  /// A key sharc has no equivalent for must be absent, null or `expected`.
  Status require(llvm::StringRef key, const llvm::json::Value &expected,
                 const std::string &why) const {
    const llvm::json::Value *value = object_.get(key);
    if (!value || value->kind() == llvm::json::Value::Null ||
        *value == expected)
      return Status::ok();
    return bad("'" + key.str() + "' is not supported: " + why);
  }

  Status bad(const std::string &message) const {
    return Status::invalidInput(path_ + ": " + message);
  }

private:
  const llvm::json::Object &object_;
  std::string path_;
};

Result<std::string> modelYaml(const std::string &dir, const std::string &name,
                              const llvm::json::Object &object,
                              const std::string &configPath) {
  HfConfigReader config(object, configPath);
  std::optional<llvm::StringRef> type = object.getString("model_type");
  if (!type || *type != "qwen3")
    return config.bad("model_type must be 'qwen3' (sharc trains MiniMind's "
                      "block, which is Qwen3's)");
  SHARC_TRY(config.require("hidden_act", "silu", "sharc's MLP is SwiGLU"));
  SHARC_TRY(config.require("attention_bias", false, "sharc has no biases"));
  SHARC_TRY(config.require("use_sliding_window", false,
                           "sharc's attention is full causal"));
  SHARC_TRY(config.require("rope_scaling", llvm::json::Object{},
                           "sharc's RoPE is unscaled"));
  double theta = 1e6;
  if (const llvm::json::Object *rope = object.getObject("rope_parameters")) {
    std::optional<llvm::StringRef> ropeType = rope->getString("rope_type");
    if (ropeType && *ropeType != "default")
      return config.bad("rope_parameters.rope_type '" + ropeType->str() +
                        "' is not supported: sharc's RoPE is unscaled");
    auto value = HfConfigReader(*rope, configPath).number("rope_theta", theta);
    if (!value)
      return value.status();
    theta = *value;
  }
  auto ropeTheta = config.number("rope_theta", theta);
  auto eps = config.number("rms_norm_eps", 1e-6);
  for (const auto *result : {&ropeTheta, &eps})
    if (!*result)
      return result->status();
  std::string yaml =
      "# " + name + ": imported from " + dir +
      " (Qwen3ForCausalLM) by sharc import\nmodel:\n  name: " + name + "\n";
  for (const char *key :
       {"hidden_size", "num_hidden_layers", "num_attention_heads",
        "num_key_value_heads", "head_dim", "intermediate_size", "vocab_size"}) {
    auto value = config.integer(key);
    if (!value)
      return value.status();
    yaml += "  " + std::string(key) + ": " + std::to_string(*value) + "\n";
  }
  yaml += "  rope_theta: " + exactDouble(*ropeTheta) + "\n";
  yaml += "  rms_norm_eps: " + exactDouble(*eps) + "\n";
  bool tied = object.getBoolean("tie_word_embeddings").value_or(false);
  yaml +=
      std::string("  tie_word_embeddings: ") + (tied ? "true" : "false") + "\n";
  return yaml;
}

} // namespace

Status sharc::importHf(const std::string &dir, const std::string &modelPath,
                       const std::string &checkpointPath) {
  std::string configPath = dir + "/config.json";
  auto text = readWholeFile(configPath, "config");
  if (!text)
    return text.status();
  llvm::Expected<llvm::json::Value> json = llvm::json::parse(*text);
  if (!json)
    return Status::invalidInput(
        configPath + ": invalid JSON: " + llvm::toString(json.takeError()));
  const llvm::json::Object *object = json->getAsObject();
  if (!object)
    return Status::invalidInput(configPath + ": expected a JSON object");
  std::string name = std::filesystem::path(modelPath).stem().string();
  auto yaml =
      modelYaml(dir, name.empty() ? "imported" : name, *object, configPath);
  if (!yaml)
    return yaml.status();
  // The frontend checks what sharc needs beyond the JSON's kinds (head_dim
  // even, heads divisible by kv heads, sizes in range).
  frontend::ConfigResult config = frontend::readConfigString(*yaml, modelPath);
  if (!config.ok())
    return Status::invalidInput(configPath + ": " + config.error->message);

  auto hfWeights = readHfWeights(dir);
  if (!hfWeights)
    return hfWeights.status();
  const std::string &weightsPath = hfWeights->path;
  const plan::TensorFile *weights = &hfWeights->tensors;
  plan::TensorFile checkpoint;
  checkpoint.metadata["format"] = "sharc-checkpoint";
  checkpoint.metadata["model"] = config.config->model.name.value;
  checkpoint.metadata["step"] = "0";
  std::map<std::string, const plan::NamedTensor *> byName;
  for (const plan::NamedTensor &tensor : weights->tensors)
    byName[tensor.name] = &tensor;
  for (const ParamShape &param : expectedParams(config.config->model)) {
    std::string hfName = hfTensorName(param.name);
    auto found = byName.find(hfName);
    if (found == byName.end())
      return Status::invalidInput(weightsPath + ": no tensor '" + hfName +
                                  "', which config.json implies");
    if (found->second->shape != param.shape)
      return Status::invalidInput(weightsPath + ": tensor '" + hfName +
                                  "' is " + shapeText(found->second->shape) +
                                  " but config.json makes it " +
                                  shapeText(param.shape));
    plan::NamedTensor tensor = *found->second;
    tensor.name = param.name;
    checkpoint.tensors.push_back(std::move(tensor));
    byName.erase(found);
  }
  // A tied model may still store its lm_head (transformers can save both).
  if (config.config->model.tieWordEmbeddings.value)
    byName.erase("lm_head.weight");
  if (!byName.empty())
    return Status::invalidInput(weightsPath + ": tensor '" +
                                byName.begin()->first +
                                "' has no place in sharc's model (" +
                                std::to_string(byName.size()) + " such)");
  std::filesystem::path parent = std::filesystem::path(modelPath).parent_path();
  if (!parent.empty())
    SHARC_TRY(makeDirectory(parent.string()));
  SHARC_TRY(writeFileAtomically(modelPath, {*yaml}, "model"));
  return plan::writeSafeTensors(checkpointPath, checkpoint);
}

namespace {

int report(const Status &status) {
  if (status)
    return 0;
  std::fprintf(stderr, "sharc: error: %s\n", status.message().c_str());
  return status.exitCode() == 0 ? 1 : status.exitCode();
}

int usage(const std::string &message) {
  std::fprintf(stderr,
               "sharc: error: %s\nusage: sharc export --format hf CKPT "
               "MODEL.yaml -o DIR [--tokenizer tokenizer.json]\n       sharc "
               "import DIR -o MODEL.yaml "
               "--checkpoint CKPT\n",
               message.c_str());
  return 2;
}

} // namespace

int sharc::runExportCommand(const std::vector<std::string> &args) {
  std::string format, outDir, tokenizer;
  std::vector<std::string> positional;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--format" || args[i] == "-o" || args[i] == "--tokenizer") {
      if (i + 1 >= args.size())
        return usage(args[i] + " needs a value");
      std::string &into = args[i] == "-o"         ? outDir
                          : args[i] == "--format" ? format
                                                  : tokenizer;
      into = args[++i];
    } else if (!args[i].empty() && args[i][0] == '-') {
      return usage("unknown flag '" + args[i] + "'");
    } else {
      positional.push_back(args[i]);
    }
  }
  if (format != "hf")
    return usage(format.empty()
                     ? "--format is required (hf)"
                     : "unknown format '" + format + "' (expected hf)");
  if (positional.size() != 2 || outDir.empty())
    return usage("export needs CKPT, MODEL.yaml and -o DIR");
  return report(exportHf(positional[0], positional[1], outDir, tokenizer));
}

int sharc::runImportCommand(const std::vector<std::string> &args) {
  std::string modelPath, checkpointPath;
  std::vector<std::string> positional;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "-o" || args[i] == "--checkpoint") {
      if (i + 1 >= args.size())
        return usage(args[i] + " needs a value");
      std::string &into = args[i] == "-o" ? modelPath : checkpointPath;
      into = args[++i];
    } else if (!args[i].empty() && args[i][0] == '-') {
      return usage("unknown flag '" + args[i] + "'");
    } else {
      positional.push_back(args[i]);
    }
  }
  if (positional.size() != 1 || modelPath.empty() || checkpointPath.empty())
    return usage("import needs DIR, -o MODEL.yaml and --checkpoint CKPT");
  return report(importHf(positional[0], modelPath, checkpointPath));
}
