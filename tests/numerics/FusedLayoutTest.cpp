//===- FusedLayoutTest.cpp - where fused projections put their weights ----===//
//
// With sharc-fuse-projections each layer's q/k/v weights (and gate/up) are
// one parameter buffer in the plan, and each projection's parameter a view
// of its own contiguous rows, so a checkpoint keeps the per-projection
// names while one GEMM reads them all. Drawn for one rank of tiny at tp=2
// (q 32 rows, k 16, v 16 of 64 columns, f32):
//
//   fused  +--------- q ---------+---- k ----+---- v ----+
//          0                    8 KiB      12 KiB     16 KiB
//
//===----------------------------------------------------------------------===//

#include "tests/numerics/NumericsSupport.h"

#include <catch2/catch.hpp>

using namespace sharc;
using namespace sharc::testing;

namespace {

const plan::Buffer &bufferOf(const plan::Plan &plan, const std::string &name) {
  const plan::ParamEntry *param = plan.findParam(name);
  INFO(name);
  REQUIRE(param);
  return plan.buffers[param->buffer];
}

/// The named parameters are views of one buffer, side by side in order,
/// which they fill exactly.
void requireSideBySide(const plan::Plan &plan,
                       const std::vector<std::string> &names) {
  const plan::Buffer &first = bufferOf(plan, names[0]);
  REQUIRE(first.viewOf >= 0);
  const plan::Buffer &fused = plan.buffers[first.viewOf];
  REQUIRE(fused.viewOf == -1);
  REQUIRE(fused.region == plan::Region::Param);
  int64_t offset = fused.offset;
  for (const std::string &name : names) {
    const plan::Buffer &piece = bufferOf(plan, name);
    INFO(name);
    REQUIRE(piece.viewOf == fused.id);
    REQUIRE(piece.offset == offset);
    offset += piece.numBytes;
  }
  REQUIRE(offset == fused.offset + fused.numBytes);
}

} // namespace

TEST_CASE("fused projections keep each parameter as a view of one weight",
          "[numerics][fuse]") {
  PipelineOptions fused;
  REQUIRE(applyModePreset("tp_sp_async_vp", 2, fused));
  fused.fuseProjections = true;
  PipelineOptions plain = fused;
  plain.fuseProjections = false;
  plan::Plan withFusion = compilePlan("tiny.yaml", fused, false);
  plan::Plan without = compilePlan("tiny.yaml", plain, false);

  for (int layer = 0; layer < 2; ++layer) {
    std::string prefix = "layers." + std::to_string(layer) + ".";
    requireSideBySide(withFusion, {prefix + "self_attn.q_proj.weight",
                                   prefix + "self_attn.k_proj.weight",
                                   prefix + "self_attn.v_proj.weight"});
    requireSideBySide(withFusion, {prefix + "mlp.gate_proj.weight",
                                   prefix + "mlp.up_proj.weight"});
    // The row-parallel and norm weights are not fused.
    REQUIRE(bufferOf(withFusion, prefix + "self_attn.o_proj.weight").viewOf ==
            -1);
  }
  // The picture above, for layer 0.
  const plan::Buffer &q =
      bufferOf(withFusion, "layers.0.self_attn.q_proj.weight");
  const plan::Buffer &k =
      bufferOf(withFusion, "layers.0.self_attn.k_proj.weight");
  const plan::Buffer &v =
      bufferOf(withFusion, "layers.0.self_attn.v_proj.weight");
  int64_t base = withFusion.buffers[q.viewOf].offset;
  REQUIRE(q.offset - base == 0);
  REQUIRE(k.offset - base == 8192);
  REQUIRE(v.offset - base == 12288);
  REQUIRE(withFusion.buffers[q.viewOf].numBytes == 16384);
  // A checkpoint sees the same table: names, global shapes, shardings, and
  // each parameter's own optimizer state.
  REQUIRE(withFusion.params.size() == without.params.size());
  for (const plan::ParamEntry &param : without.params) {
    const plan::ParamEntry *other = withFusion.findParam(param.name);
    INFO(param.name);
    REQUIRE(other);
    REQUIRE(other->globalShape == param.globalShape);
    REQUIRE(other->sharding.dimOfAxis == param.sharding.dimOfAxis);
    REQUIRE(other->state.size() == param.state.size());
    for (int64_t state : other->state)
      REQUIRE(withFusion.buffers[state].viewOf == -1);
  }
}
