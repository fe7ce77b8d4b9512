//===- DecodeOps.cpp - generation's decode_attention instruction ---------===//
//
// decode_attention (attrs head_dim, theta): q [T, B, Hq*D], k and v
// [T, B, Hkv*D], k_cache and v_cache [C, B, Hkv*D] (updated in place),
// positions [T, B] int32, out [T, B, Hq*D]; kernels/DecodeAttention.h
// states the math. The runtime writes the positions (Runtime::setDecodeStep
// and setPrefillStep), checking each against every cache's C, so the
// kernels need not.
//
//===----------------------------------------------------------------------===//

#include "executor/OpTable.h"

#include "kernels/DecodeAttention.h"

#include <string>
#include <tuple>

namespace sharc::exec {

using namespace opcheck;

namespace {

/// A prefill step through the stream's attention library (cuDNN's SDPA),
/// where it takes the step; an empty Launch where it does not, so the
/// decode kernels run (a refusal at prepare is said on stderr, as for
/// attention).
Result<Launch> bindPrefill(const OpCall &c, const OpEnv &env,
                           const kernels::DecodeAttentionArgs &args) {
  AttentionEngine *engine = streamAttention(c, env);
  if (!engine || !engine->accepts(args))
    return Launch();
  std::optional<int64_t> need = prepareOnLibrary(c, *engine, args);
  if (!need)
    return Launch();
  return libraryLaunchOnScratch(c, env, args, *need);
}

Result<Launch> bindDecodeAttention(const OpCall &c, const OpEnv &env) {
  const TensorRef &q = c.operands[0], &k = c.operands[1], &v = c.operands[2];
  const TensorRef &kCache = c.operands[3], &vCache = c.operands[4];
  const TensorRef &positions = c.operands[5], &out = c.results[0];
  for (auto [ref, role] : {std::tuple{&q, "q"},
                           {&k, "k"},
                           {&v, "v"},
                           {&kCache, "k_cache"},
                           {&vCache, "v_cache"},
                           {&out, "out"}}) {
    SHARC_TRY(isFloat(*ref, role));
    SHARC_TRY(rankIs(*ref, 3, role));
  }
  int64_t headDim = c.instr->getInt("head_dim");
  SHARC_TRY(positiveAttr("head_dim", headDim));
  if (headDim % 2 != 0)
    return Status::invalidInput("head_dim " + std::to_string(headDim) +
                                " must be even for rope");
  if (env.onDevice && headDim > kernels::kDecodeMaxDeviceHeadDim)
    return Status::invalidInput(
        "head_dim " + std::to_string(headDim) +
        " exceeds the cuda decode kernel's " +
        std::to_string(kernels::kDecodeMaxDeviceHeadDim));
  int64_t rows = q.shape()[0], batch = q.shape()[1];
  if (q.shape()[2] % headDim != 0)
    return Status::invalidInput("q must be [T, B, heads * head_dim]");
  SHARC_TRY(sameShape(v, k, "v"));
  SHARC_TRY(sameShape(out, q, "out"));
  SHARC_TRY(sameShape(vCache, kCache, "v_cache"));
  if (k.shape()[0] != rows || k.shape()[1] != batch ||
      k.shape()[2] % headDim != 0)
    return Status::invalidInput("k must be [T, B, kv_heads * head_dim] with "
                                "q's T and B");
  int64_t numHeads = q.shape()[2] / headDim;
  int64_t numKvHeads = k.shape()[2] / headDim;
  if (numKvHeads == 0 || numHeads % numKvHeads != 0)
    return Status::invalidInput(
        std::to_string(numHeads) + " query heads are no multiple of " +
        std::to_string(numKvHeads) + " key/value heads");
  if (kCache.shape()[1] != batch || kCache.shape()[2] != k.shape()[2])
    return Status::invalidInput("k_cache must be [C, B, kv_heads * head_dim] "
                                "like k");
  SHARC_TRY(dtypeIs(positions, DType::I32, "positions"));
  SHARC_TRY(numelIs(positions, rows * batch, "positions"));
  // The kernels index the caches by these values unchecked: only the
  // inputs the runtime writes, and checks against every cache, will do.
  if (positions.buffer->region != plan::Region::Input ||
      (positions.buffer->name != "positions" &&
       positions.buffer->name != "prefill_positions"))
    return Status::invalidInput(
        "decode_attention's positions must be the plan's 'positions' or "
        "'prefill_positions' input (the runtime checks its values against "
        "the caches)");
  kernels::DecodeAttentionArgs args{
      .q = q.cview(),
      .k = k.cview(),
      .v = v.cview(),
      .kCache = kCache.view(),
      .vCache = vCache.view(),
      .positions = static_cast<const int32_t *>(positions.data),
      .out = out.view(),
      .batch = batch,
      .numHeads = numHeads,
      .numKvHeads = numKvHeads,
      .headDim = headDim,
      .cacheLen = kCache.shape()[0],
      .theta = c.instr->getFloat("theta"),
      .rows = rows};
  if (Result<Launch> prefill = bindPrefill(c, env, args); !prefill || *prefill)
    return prefill;
  return launchKernelWithScratch(env, *c.instr, args,
                                 SHARC_KERNELS_WITH_SCRATCH(decodeAttention));
}

} // namespace

void addDecodeOps(std::unordered_map<std::string, OpDef> &table) {
  // The caches (operands 3 and 4) are written in place.
  table["decode_attention"] = {bindDecodeAttention, 6, 1, 0b11000};
}

} // namespace sharc::exec
