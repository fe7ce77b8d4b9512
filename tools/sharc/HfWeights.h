//===- HfWeights.h - a Hugging Face model's weights ----------- -*- C++ -*-===//
// defines: HfWeights, readHfWeights
//
// transformers saves a model as DIR/model.safetensors, or, past its shard
// size, as several files listed by DIR/model.safetensors.index.json:
//   {"metadata": {"total_size": N},
//    "weight_map": {"model.norm.weight": "model-00002-of-00002.safetensors",
//                   ...}}
// readHfWeights gives every tensor of either as one TensorFile (F16 tensors
// widened to F32 by the safetensors reader). Each shard is a file of DIR
// named by the index; every tensor of a shard must be mapped to it, and
// every mapped tensor must be in its shard, so a stale index or a missing
// shard is bad input naming the file and the tensor.
#pragma once

#include "planner/plan/SafeTensors.h"
#include "planner/plan/Status.h"

#include <string>

namespace sharc {

struct HfWeights {
  plan::TensorFile tensors;
  /// The file messages about the weights name: model.safetensors, or the
  /// index of a sharded model.
  std::string path;
};

Result<HfWeights> readHfWeights(const std::string &dir);

} // namespace sharc
