//===- SharcDecodeOps.cpp - decode_attention's checks and cost ------------===//

#include "ir/SharcOps.h"

using namespace mlir;
using namespace sharc;

LogicalResult DecodeAttentionOp::verify() {
  int64_t headDim = getHeadDim();
  if (headDim <= 0 || headDim % 2 != 0)
    return emitOpError("head_dim must be positive and even, got ") << headDim;
  if (!(getTheta().convertToDouble() > 0))
    return emitOpError("theta must be positive");
  auto q = tensorOf(getQ()), k = tensorOf(getK()),
       cache = tensorOf(getKCache());
  for (auto [value, name] : {std::pair{getQ(), "q"},
                             {getK(), "k"},
                             {getV(), "v"},
                             {getKCache(), "k_cache"},
                             {getVCache(), "v_cache"},
                             {getOut(), "out"}})
    if (tensorOf(value).getRank() != 3)
      return emitOpError() << name << " must have rank 3, got "
                           << value.getType();
  if (getK().getType() != getV().getType() ||
      k.getShape()[0] != q.getShape()[0] ||
      k.getShape()[1] != q.getShape()[1] ||
      k.getElementType() != q.getElementType())
    return emitOpError("k and v must be [T, B, Hkv * D] like q, got ")
           << getK().getType() << " and " << getV().getType();
  if (q.getShape()[2] % headDim != 0 || k.getShape()[2] % headDim != 0 ||
      (q.getShape()[2] / headDim) % (k.getShape()[2] / headDim) != 0)
    return emitOpError("query heads ")
           << q.getShape()[2] << "/" << headDim << " must be a multiple of "
           << "key/value heads " << k.getShape()[2] << "/" << headDim;
  if (getKCache().getType() != getVCache().getType() ||
      cache.getShape()[1] != k.getShape()[1] ||
      cache.getShape()[2] != k.getShape()[2] ||
      cache.getElementType() != k.getElementType())
    return emitOpError("the caches must be [C, B, Hkv * D] of k's type, got ")
           << getKCache().getType() << " and " << getVCache().getType();
  auto positions = tensorOf(getPositions()).getShape();
  if (positions.size() != 2 || positions[0] != q.getShape()[0] ||
      positions[1] != q.getShape()[1])
    return emitOpError("positions must be [T, B] like q's rows, got ")
           << getPositions().getType();
  if (getOut().getType() != getQ().getType() ||
      getNewKCache().getType() != getKCache().getType() ||
      getNewVCache().getType() != getVCache().getType())
    return emitOpError("out must have q's type and the new caches the "
                       "caches'");
  return success();
}

int64_t DecodeAttentionOp::getFlops() {
  // QK^T and PV over the whole cache at most: 4 * C * T * B * Hq * D.
  auto q = tensorOf(getQ()).getShape();
  return 4 * tensorOf(getKCache()).getShape()[0] * q[0] * q[1] * q[2];
}
