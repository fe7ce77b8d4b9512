//===- ModelBuilder.h - the forward program ---------------------*- C++ -*-===//
// defines: BuildOptions, buildModel
//
// Turns a frontend::Config into a module holding one function, @train_step,
// that computes the loss of one batch with global shapes: the dense program
// that every pass starts from. With `decode`, the function is instead one
// step of generation: one new position per sample against each layer's
// key/value cache of seq_len positions (decode_attention), returning the
// logits and the updated caches; with `prefillRows` T it also holds a
// prompt's prefill: T positions a sample (inputs prefill_tokens and
// prefill_positions) through the same parameters into the same caches, up
// to the last layer's attention (output `prefill`), which evaluation runs
// alone. Every op carries the location of the YAML key that made it, so a
// pass's error points at the user's line.
#pragma once

#include "ir/frontend/ModelConfig.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

namespace sharc {

struct BuildOptions {
  bool emitLogits = false; ///< also return the logits (for validation)
  bool decode = false;     ///< a generation step with a key/value cache
  int64_t prefillRows = 0; ///< decode: also a prefill of this many rows
};

/// Builds the forward program. The config is already validated by the
/// reader, so this cannot fail on user input.
mlir::OwningOpRef<mlir::ModuleOp> buildModel(mlir::MLIRContext *context,
                                             const frontend::Config &config,
                                             const BuildOptions &options);

} // namespace sharc
