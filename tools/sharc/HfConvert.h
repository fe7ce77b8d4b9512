//===- HfConvert.h - Hugging Face Qwen3 checkpoints out and in --*- C++ -*-===//
// defines: exportHf, importHf, hfTensorName, sharcTensorName,
//          runExportCommand, runImportCommand
//
// MiniMind's block is Qwen3's (GQA, rotate-half RoPE, RMSNorm, per-head q/k
// RMSNorm before RoPE, SwiGLU, no biases), and sharc's parameters already
// carry Qwen3's names and PyTorch's layouts (a Linear weight is [out, in],
// kernels/Rope.h rotates halves as transformers does), so converting is
// renaming: "model." in front of everything but lm_head. A tied model
// stores no lm_head.
//
//   sharc export --format hf CKPT MODEL.yaml -o DIR [--tokenizer TOK]
//     -> DIR/config.json (Qwen3ForCausalLM) and DIR/model.safetensors
//        (and DIR/tokenizer.json, tokenizer_config.json)
//   sharc import DIR -o MODEL.yaml --checkpoint CKPT
//     -> a model file and a checkpoint of its parameters (no optimizer
//        state: training continues with fresh AdamW moments)
#pragma once

#include "planner/plan/Status.h"

#include <string>
#include <vector>

namespace sharc {

/// "layers.0.mlp.up_proj.weight" -> "model.layers.0.mlp.up_proj.weight";
/// "lm_head.weight" stays.
std::string hfTensorName(const std::string &sharcName);
/// The inverse; "" for a name without the "model." prefix other than
/// lm_head.weight.
std::string sharcTensorName(const std::string &hfName);

/// Every parameter the model file describes must be in the checkpoint with
/// its shape (bad input naming it otherwise); optimizer state is left out.
/// With tokenizerPath, DIR also gets that tokenizer.json and a
/// tokenizer_config.json, so AutoTokenizer loads DIR too.
Status exportHf(const std::string &checkpointPath, const std::string &modelPath,
                const std::string &outDir,
                const std::string &tokenizerPath = "");

/// Reads DIR/config.json (a Qwen3ForCausalLM sharc can train: silu, no
/// biases, no rope scaling or sliding window) and DIR/model.safetensors.
Status importHf(const std::string &dir, const std::string &modelPath,
                const std::string &checkpointPath);

/// `sharc export ...` and `sharc import ...` after the command word: flags
/// parsed, errors printed as `sharc: error: ...`; the exit status.
int runExportCommand(const std::vector<std::string> &args);
int runImportCommand(const std::vector<std::string> &args);

} // namespace sharc
