//===- ParamInit.cpp - reproducible, shard-independent parameter init -----===//

#include "executor/ParamInit.h"

#include "kernels/TensorView.h"

namespace sharc::exec {

uint64_t fnv1a(std::string_view text) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (char c : text) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 0x100000001b3ull;
  }
  return hash;
}

uint64_t drawKey(uint64_t seed, std::string_view name) {
  return splitmix64(seed ^ fnv1a(name));
}

std::vector<int64_t> sliceRowStarts(const ShardSlice &slice) {
  int64_t count = numElements(slice.localShape);
  int64_t columns = slice.localShape.empty() ? 1 : slice.localShape.back();
  int64_t rows = columns == 0 ? 0 : count / columns;
  std::vector<int64_t> starts(static_cast<size_t>(rows));
  for (int64_t row = 0; row < rows; ++row)
    starts[row] = slice.globalIndex(row * columns);
  return starts;
}

ShardDraw shardDraw(const plan::InitSpec &spec, uint64_t seed,
                    std::string_view name, const ShardSlice &slice,
                    kernels::TensorView out) {
  ShardDraw draw{.rowStarts = sliceRowStarts(slice), .args = {}};
  draw.args = {.out = out,
               .rowStarts = draw.rowStarts.data(),
               .rows = static_cast<int64_t>(draw.rowStarts.size()),
               .columns =
                   slice.localShape.empty() ? 1 : slice.localShape.back(),
               .key = drawKey(seed, name),
               .stddev = spec.stddev};
  return draw;
}

double initValue(const plan::InitSpec &spec, uint64_t seed,
                 std::string_view name, int64_t globalIndex) {
  if (spec.kind == "ones")
    return 1.0;
  if (spec.kind == "zeros")
    return 0.0;
  return kernels::cpu::drawNormalValue(spec.stddev, drawKey(seed, name),
                                       globalIndex);
}

Status initShard(const plan::InitSpec &spec, uint64_t seed,
                 std::string_view name, const ShardSlice &slice, void *local,
                 DType dtype) {
  if (spec.kind != "normal" && spec.kind != "ones" && spec.kind != "zeros")
    return Status::invalidInput("parameter '" + std::string(name) +
                                "' has unknown init kind '" + spec.kind +
                                "' (expected normal, ones or zeros)");
  kernels::TensorView view{local, dtype};
  int64_t count = numElements(slice.localShape);
  if (spec.kind != "normal") {
    double value = spec.kind == "ones" ? 1.0 : 0.0;
    for (int64_t i = 0; i < count; ++i)
      kernels::storeElement(view, i, value);
    return Status::ok();
  }
  kernels::cpu::drawNormal(shardDraw(spec, seed, name, slice, view).args);
  return Status::ok();
}

} // namespace sharc::exec
