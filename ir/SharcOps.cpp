//===- SharcOps.cpp - verifiers and costs of the sharc ops ----------------===//

#include "ir/SharcOps.h"

#include "mlir/IR/OpImplementation.h"

using namespace mlir;
using namespace sharc;

#include "ir/SharcInterfaces.cpp.inc"

#define GET_OP_CLASSES
#include "ir/SharcOps.cpp.inc"

RankedTensorType sharc::tensorOf(Value value) {
  return cast<RankedTensorType>(value.getType());
}

int64_t sharc::tensorBytes(Value value) {
  RankedTensorType tensor = tensorOf(value);
  return tensor.getNumElements() *
         llvm::divideCeil(tensor.getElementTypeBitWidth(), 8);
}

namespace {

/// Checks that two values have the same shape and element type.
LogicalResult verifySameType(Operation *op, Value a, StringRef aName, Value b,
                             StringRef bName) {
  if (a.getType() != b.getType())
    return op->emitOpError()
           << bName << " type " << b.getType() << " must equal " << aName
           << " type " << a.getType();
  return success();
}

/// Checks that a cotangent has its primal's shape and element type; the
/// placements differ by design (see cotangentType).
LogicalResult verifySameShape(Operation *op, Value a, StringRef aName, Value b,
                              StringRef bName) {
  auto aType = cast<RankedTensorType>(a.getType());
  auto bType = cast<RankedTensorType>(b.getType());
  if (aType.getShape() != bType.getShape() ||
      aType.getElementType() != bType.getElementType())
    return op->emitOpError() << bName << " type " << b.getType()
                             << " must have the shape and element type of "
                             << aName << " type " << a.getType();
  return success();
}

/// Checks `value` is [S, B, *] against a reference [S, B, ...] tensor.
LogicalResult verifyTokenMajor(Operation *op, Value value, StringRef name,
                               int64_t rank) {
  if (tensorOf(value).getRank() != rank)
    return op->emitOpError()
           << name << " must have rank " << rank << ", got " << value.getType();
  return success();
}

LogicalResult verifyHeads(Operation *op, Value value, StringRef name,
                          int64_t headDim) {
  if (headDim <= 0)
    return op->emitOpError() << "head_dim must be positive, got " << headDim;
  int64_t width = tensorOf(value).getShape().back();
  if (width % headDim != 0)
    return op->emitOpError() << name << " width " << width
                             << " is not a multiple of head_dim " << headDim;
  return success();
}

int64_t numElements(Value value) { return tensorOf(value).getNumElements(); }

int64_t gemmFlops(Value outer, Value weight) {
  auto shape = tensorOf(weight).getShape();
  return 2 * numElements(outer) / tensorOf(outer).getShape().back() * shape[0] *
         shape[1];
}

/// position_split says how position_axis splits the sequence: absent
/// (contiguous blocks) or "balanced" (kernels/SequencePositions.h).
LogicalResult verifyPositionSplit(Operation *op, StringAttr axis,
                                  StringAttr split) {
  if (!split)
    return success();
  if (split.getValue() != "balanced")
    return op->emitOpError("position_split must be \"balanced\", got \"")
           << split.getValue() << "\"";
  if (!axis)
    return op->emitOpError("position_split needs a position_axis");
  return success();
}

} // namespace

//===----------------------------------------------------------------------===//
// Forward ops
//===----------------------------------------------------------------------===//

LogicalResult EmbeddingOp::verify() {
  auto table = tensorOf(getTable()), ids = tensorOf(getIds()),
       out = tensorOf(getOut());
  if (table.getRank() != 2 || ids.getRank() != 2)
    return emitOpError("expects a rank-2 table and rank-2 ids, got ")
           << table << " and " << ids;
  SmallVector<int64_t> expected{ids.getShape()[0], ids.getShape()[1],
                                table.getShape()[1]};
  if (out.getShape() != ArrayRef<int64_t>(expected) ||
      out.getElementType() != table.getElementType())
    return emitOpError("result must be [S, B, H] of the table's element "
                       "type, got ")
           << out;
  return success();
}

/// The lookup's rows follow the ids' split on each axis; a table split over
/// the vocabulary gives partial sums (each rank's zero rows for ids it does
/// not hold).
LogicalResult EmbeddingOp::inferReturnTypes(MLIRContext *context,
                                            std::optional<Location> location,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &types) {
  auto table = cast<RankedTensorType>(adaptor.getTable().getType());
  auto ids = cast<RankedTensorType>(adaptor.getIds().getType());
  if (table.getRank() != 2 || ids.getRank() != 2)
    return emitOptionalError(location, "expects a rank-2 table and ids");
  PlacementAttr pt = getPlacement(table);
  PlacementAttr out = getPlacement(ids);
  for (auto [axis, code] : llvm::zip(pt.getAxes(), pt.getCodes())) {
    if (code == 0)
      out = out.withAxis(axis, PlacementAttr::kPartial);
    else if (code == 1)
      out = out.withAxis(axis, 2);
  }
  types.push_back(
      withPlacement(RankedTensorType::get({ids.getShape()[0], ids.getShape()[1],
                                           table.getShape()[1]},
                                          table.getElementType()),
                    out));
  return success();
}

LogicalResult RmsNormOp::verify() {
  auto x = tensorOf(getX()), w = tensorOf(getW());
  if (w.getRank() != 1)
    return emitOpError("weight must have rank 1, got ") << w;
  if (x.getShape().back() % w.getShape()[0] != 0)
    return emitOpError("last dimension ")
           << x.getShape().back() << " is not a multiple of the weight size "
           << w.getShape()[0];
  if (getEps().convertToDouble() <= 0.0)
    return emitOpError("eps must be positive");
  return success();
}

LogicalResult MatmulOp::verify() {
  auto x = tensorOf(getX()), w = tensorOf(getW()), y = tensorOf(getY());
  if (w.getRank() != 2)
    return emitOpError("weight must have rank 2, got ") << w;
  if (x.getShape().back() != w.getShape()[1])
    return emitOpError("contraction mismatch: x has ")
           << x.getShape().back() << " columns, weight [out, in] has "
           << w.getShape()[1] << " inputs";
  SmallVector<int64_t> expected(x.getShape());
  expected.back() = w.getShape()[0];
  if (y.getShape() != ArrayRef<int64_t>(expected))
    return emitOpError("result shape must be [..., ")
           << w.getShape()[0] << "], got " << y;
  return success();
}
int64_t MatmulOp::getFlops() { return gemmFlops(getY(), getW()); }

LogicalResult MatmulOp::inferReturnTypes(MLIRContext *context,
                                         std::optional<Location> location,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &types) {
  auto x = cast<RankedTensorType>(adaptor.getX().getType());
  auto w = cast<RankedTensorType>(adaptor.getW().getType());
  if (w.getRank() != 2 || x.getRank() < 1)
    return emitOptionalError(location, "expects a rank-2 weight, got ", w);
  SmallVector<int64_t> shape(x.getShape());
  shape.back() = w.getShape()[0];
  PlacementAttr px = getPlacement(x), pw = getPlacement(w);
  SmallVector<std::pair<StringRef, int64_t>> codes;
  SmallVector<StringAttr> axes(px.getAxes());
  axes.append(pw.getAxes().begin(), pw.getAxes().end());
  for (StringAttr axisAttr : axes) {
    StringRef axis = axisAttr.getValue();
    if (llvm::any_of(codes, [&](auto entry) { return entry.first == axis; }))
      continue;
    std::optional<int64_t> code = placement::matmulRule(
        px.getAxis(axis), pw.getAxis(axis), x.getRank() - 1);
    if (!code)
      return emitOptionalError(location, "no placement rule for input ",
                               placement::name(px.getAxis(axis)),
                               " and weight ",
                               placement::name(pw.getAxis(axis)), " on ", axis);
    codes.push_back({axis, *code});
  }
  // Splits passing through keep their order.
  SmallVector<StringRef> order;
  for (StringAttr axis : px.getOrder())
    order.push_back(axis.getValue());
  types.push_back(
      withPlacement(RankedTensorType::get(shape, x.getElementType()),
                    PlacementAttr::make(context, codes, order)));
  return success();
}

LogicalResult RopeOp::verify() {
  if (failed(verifyTokenMajor(*this, getX(), "x", 3)) ||
      failed(verifyHeads(*this, getX(), "x", getHeadDim())))
    return failure();
  if (getHeadDim() % 2 != 0)
    return emitOpError("head_dim must be even, got ") << getHeadDim();
  return verifyPositionSplit(*this, getPositionAxisAttr(),
                             getPositionSplitAttr());
}

LogicalResult AttentionOp::verify() {
  if (failed(verifyPositionSplit(*this, getPositionAxisAttr(),
                                 getPositionSplitAttr())))
    return failure();
  int64_t headDim = getHeadDim();
  for (auto [value, name] :
       {std::pair{getQ(), "q"}, std::pair{getK(), "k"}, std::pair{getV(), "v"}})
    if (failed(verifyTokenMajor(*this, value, name, 3)) ||
        failed(verifyHeads(*this, value, name, headDim)))
      return failure();
  if (failed(verifySameType(*this, getK(), "k", getV(), "v")) ||
      failed(verifySameType(*this, getQ(), "q", getOut(), "out")))
    return failure();
  auto q = tensorOf(getQ()), k = tensorOf(getK());
  // A query block (position_axis) meets the whole sequence's keys.
  if (getPositionAxis()) {
    if (q.getShape()[1] != k.getShape()[1] ||
        k.getShape()[0] % q.getShape()[0] != 0)
      return emitOpError("a query block must share B with k and its S must "
                         "divide k's, got ")
             << q << " and " << k;
  } else if (q.getShape().drop_back() != k.getShape().drop_back()) {
    return emitOpError("q and k must share [S, B], got ") << q << " and " << k;
  }
  int64_t numHeads = q.getShape()[2] / headDim;
  int64_t numKvHeads = k.getShape()[2] / headDim;
  if (numHeads % numKvHeads != 0)
    return emitOpError("query heads (")
           << numHeads << ") must be a multiple of KV heads (" << numKvHeads
           << ")";
  SmallVector<int64_t> lseShape{q.getShape()[1], numHeads, q.getShape()[0]};
  if (tensorOf(getLse()).getShape() != ArrayRef<int64_t>(lseShape))
    return emitOpError("lse must be [B, Hq, S] = [")
           << lseShape[0] << ", " << lseShape[1] << ", " << lseShape[2]
           << "], got " << getLse().getType();
  return success();
}
/// out has q's type; lse, [B, Hq, S], is split where q's batch and heads
/// are.
LogicalResult sharc::attentionResultTypes(MLIRContext *context,
                                          std::optional<Location> location,
                                          Type qType, int64_t headDim,
                                          SmallVectorImpl<Type> &types) {
  auto q = cast<RankedTensorType>(qType);
  if (q.getRank() != 3 || headDim <= 0)
    return emitOptionalError(location, "expects q [S, B, heads * head_dim]");
  // q's [S, B, heads] dimensions are lse's [2, 0, 1].
  PlacementAttr pq = getPlacement(q);
  SmallVector<std::pair<StringRef, int64_t>> codes;
  for (auto [axis, code] : llvm::zip(pq.getAxes(), pq.getCodes())) {
    const int64_t lseDimOf[] = {2, 0, 1};
    codes.push_back(
        {axis.getValue(), code >= 0 && code < 3 ? lseDimOf[code] : code});
  }
  // Each axis keeps its place among those splitting its (moved) dimension.
  SmallVector<StringRef> order;
  for (StringAttr axis : pq.getOrder())
    order.push_back(axis.getValue());
  types.push_back(q);
  types.push_back(withPlacement(
      RankedTensorType::get(
          {q.getShape()[1], q.getShape()[2] / headDim, q.getShape()[0]},
          Float32Type::get(context)),
      PlacementAttr::make(context, codes, order)));
  return success();
}

LogicalResult AttentionOp::inferReturnTypes(MLIRContext *context,
                                            std::optional<Location> location,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &types) {
  return attentionResultTypes(context, location, adaptor.getQ().getType(),
                              static_cast<int64_t>(adaptor.getHeadDim()),
                              types);
}

int64_t AttentionOp::getFlops() {
  // QK^T and PV, each 2*S*Sk*D per head and sample, halved by the mask
  // (on average over the ranks of a query block split).
  auto q = tensorOf(getQ()).getShape();
  return 2 * q[0] * tensorOf(getK()).getShape()[0] * q[1] * q[2];
}

// Equal types (shape, element type and placement) are ODS constraints.
LogicalResult PermuteBlocksOp::verify() {
  ArrayRef<int64_t> order = getOrder();
  auto n = static_cast<int64_t>(order.size());
  SmallVector<bool> seen(order.size(), false);
  for (int64_t block : order) {
    if (block < 0 || block >= n || seen[block])
      return emitOpError("order must be a permutation of 0..")
             << n - 1 << ", got [" << order << "]";
    seen[block] = true;
  }
  auto x = tensorOf(getX());
  if (x.getRank() == 0 || n == 0 || x.getShape()[0] % n != 0)
    return emitOpError("dimension 0 of ")
           << x << " does not cut into " << n << " equal blocks";
  return success();
}

LogicalResult SwigluOp::verify() { return success(); }
LogicalResult AddOp::verify() { return success(); }

LogicalResult CrossEntropyOp::verify() {
  auto logits = tensorOf(getLogits()), labels = tensorOf(getLabels());
  if (logits.getRank() != 3 || labels.getRank() != 2 ||
      logits.getShape().drop_back() != labels.getShape())
    return emitOpError("expects logits [S, B, V] and labels [S, B], got ")
           << logits << " and " << labels;
  int64_t validVocab = getValidVocab();
  if (validVocab <= 0 || validVocab > logits.getShape().back())
    return emitOpError("valid_vocab ") << validVocab << " must be in [1, "
                                       << logits.getShape().back() << "]";
  return success();
}

//===----------------------------------------------------------------------===//
// Gradient ops
//===----------------------------------------------------------------------===//

LogicalResult EmbeddingGradOp::verify() {
  auto dout = tensorOf(getDout()), dtable = tensorOf(getDtable());
  if (dout.getRank() != 3 || dtable.getRank() != 2 ||
      dout.getShape()[2] != dtable.getShape()[1])
    return emitOpError("expects dout [S, B, H] and a [V, H] result, got ")
           << dout << " and " << dtable;
  return success();
}

namespace {

/// The addend of a fused op (matmul_add, matmul_dgrad_add,
/// rms_norm_grad_add) has the type of the result it is summed into.
LogicalResult verifyAddend(Operation *op, Value addend, Value result,
                           StringRef resultName = "the result's") {
  if (addend.getType() != result.getType())
    return op->emitOpError("expects the addend to have ")
           << resultName << " type, got " << addend.getType() << " and "
           << result.getType();
  return success();
}

/// dx = dy w: dy [..., N], w [N, K], dx [..., K] (matmul_dgrad and
/// matmul_dgrad_add).
LogicalResult verifyDgradShapes(Operation *op, Value dyValue, Value wValue,
                                Value dxValue) {
  auto dy = tensorOf(dyValue), w = tensorOf(wValue), dx = tensorOf(dxValue);
  if (w.getRank() != 2 || dy.getShape().back() != w.getShape()[0] ||
      dx.getShape().back() != w.getShape()[1] ||
      dx.getShape().drop_back() != dy.getShape().drop_back())
    return op->emitOpError(
               "expects dy [..., N], w [N, K] and dx [..., K], got ")
           << dy << ", " << w << " and " << dx;
  return success();
}

/// rms_norm_grad and rms_norm_grad_add: dy and dx of x's shape, dw of w's.
LogicalResult verifyNormGradShapes(Operation *op, Value x, Value w, Value dy,
                                   Value dx, Value dw) {
  if (failed(verifySameShape(op, x, "x", dy, "dy")) ||
      failed(verifySameShape(op, x, "x", dx, "dx")))
    return failure();
  return verifySameShape(op, w, "w", dw, "dw");
}

} // namespace

LogicalResult RmsNormGradOp::verify() {
  return verifyNormGradShapes(*this, getX(), getW(), getDy(), getDx(), getDw());
}

LogicalResult RmsNormGradAddOp::verify() {
  if (failed(verifyNormGradShapes(*this, getX(), getW(), getDy(), getDx(),
                                  getDw())))
    return failure();
  return verifyAddend(*this, getR(), getDx(), "dx's");
}

LogicalResult MatmulDgradOp::verify() {
  return verifyDgradShapes(*this, getDy(), getW(), getDx());
}
int64_t MatmulDgradOp::getFlops() { return gemmFlops(getDy(), getW()); }

LogicalResult MatmulAddOp::verify() {
  auto x = tensorOf(getX()), w = tensorOf(getW()), y = tensorOf(getY());
  if (w.getRank() != 2 || x.getShape().back() != w.getShape()[1] ||
      y.getShape().back() != w.getShape()[0] ||
      y.getShape().drop_back() != x.getShape().drop_back())
    return emitOpError("expects x [..., K], w [N, K] and y [..., N], got ")
           << x << ", " << w << " and " << y;
  return verifyAddend(*this, getR(), getY());
}
int64_t MatmulAddOp::getFlops() { return gemmFlops(getY(), getW()); }

LogicalResult MatmulDgradAddOp::verify() {
  if (failed(verifyDgradShapes(*this, getDy(), getW(), getDx())))
    return failure();
  return verifyAddend(*this, getR(), getDx());
}
int64_t MatmulDgradAddOp::getFlops() { return gemmFlops(getDy(), getW()); }

LogicalResult MatmulWgradOp::verify() {
  auto dy = tensorOf(getDy()), x = tensorOf(getX()), dw = tensorOf(getDw());
  if (dw.getRank() != 2 || dy.getShape().back() != dw.getShape()[0] ||
      x.getShape().back() != dw.getShape()[1] ||
      x.getShape().drop_back() != dy.getShape().drop_back())
    return emitOpError("expects dy [..., N], x [..., K] and dw [N, K], got ")
           << dy << ", " << x << " and " << dw;
  return success();
}
int64_t MatmulWgradOp::getFlops() { return gemmFlops(getDy(), getDw()); }

LogicalResult RopeGradOp::verify() {
  if (failed(verifyTokenMajor(*this, getDy(), "dy", 3)) ||
      failed(verifyHeads(*this, getDy(), "dy", getHeadDim())) ||
      failed(verifyPositionSplit(*this, getPositionAxisAttr(),
                                 getPositionSplitAttr())))
    return failure();
  return verifySameShape(*this, getDy(), "dy", getDx(), "result");
}

namespace {

/// x [S, B, h * D] and w [D], D even (rms_norm_rope and its gradient).
LogicalResult verifyNormRope(Operation *op, Value x, Value w, int64_t headDim) {
  if (failed(verifyTokenMajor(op, x, "x", 3)) ||
      failed(verifyHeads(op, x, "x", headDim)))
    return failure();
  if (headDim % 2 != 0)
    return op->emitOpError("head_dim must be even, got ") << headDim;
  auto weight = tensorOf(w);
  if (weight.getRank() != 1 || weight.getShape()[0] != headDim)
    return op->emitOpError("expects w of [head_dim] = [")
           << headDim << "], got " << weight;
  return success();
}

} // namespace

LogicalResult RmsNormRopeOp::verify() {
  return verifyNormRope(*this, getX(), getW(), getHeadDim());
}

LogicalResult RmsNormRopeGradOp::verify() {
  if (failed(verifyNormRope(*this, getX(), getW(), getHeadDim())) ||
      failed(verifySameShape(*this, getX(), "x", getDy(), "dy")) ||
      failed(verifySameShape(*this, getX(), "x", getDx(), "dx")))
    return failure();
  return verifySameShape(*this, getW(), "w", getDw(), "dw");
}

namespace {

/// gu [.., 2 * I] against y (or dy) [.., I], one element type.
LogicalResult verifyPacked(Operation *op, Value gu, Value y, StringRef name) {
  auto packed = tensorOf(gu), half = tensorOf(y);
  if (packed.getElementType() != half.getElementType())
    return op->emitOpError("expects gu and ")
           << name << " of one element type, got " << packed << " and " << half;
  ArrayRef<int64_t> shape = packed.getShape(), halfShape = half.getShape();
  if (shape.size() != halfShape.size() || shape.empty() ||
      shape.drop_back() != halfShape.drop_back() ||
      shape.back() != 2 * halfShape.back())
    return op->emitOpError("expects gu of ")
           << name << "'s shape with twice its last dimension, got " << packed
           << " and " << half;
  return success();
}

} // namespace

LogicalResult SwigluPackedOp::verify() {
  return verifyPacked(*this, getGu(), getY(), "y");
}

LogicalResult SwigluPackedGradOp::verify() {
  if (failed(verifyPacked(*this, getGu(), getDy(), "dy")))
    return failure();
  return verifySameShape(*this, getGu(), "gu", getDgu(), "dgu");
}

LogicalResult AttentionGradOp::verify() {
  if (failed(verifySameShape(*this, getQ(), "q", getDq(), "dq")) ||
      failed(verifySameShape(*this, getK(), "k", getDk(), "dk")) ||
      failed(verifySameShape(*this, getV(), "v", getDv(), "dv")) ||
      failed(verifySameShape(*this, getOut(), "out", getDout(), "dout")) ||
      failed(verifyPositionSplit(*this, getPositionAxisAttr(),
                                 getPositionSplitAttr())))
    return failure();
  return verifyHeads(*this, getQ(), "q", getHeadDim());
}
int64_t AttentionGradOp::getFlops() {
  // Recomputing QK^T, then dV, dP, dQ and dK: five S*Sk*D products per head.
  auto q = tensorOf(getQ()).getShape();
  return 5 * q[0] * tensorOf(getK()).getShape()[0] * q[1] * q[2];
}

LogicalResult SwigluGradOp::verify() {
  if (failed(verifySameShape(*this, getGate(), "gate", getUp(), "up")) ||
      failed(verifySameShape(*this, getGate(), "gate", getDy(), "dy")) ||
      failed(verifySameShape(*this, getGate(), "gate", getDgate(), "dgate")))
    return failure();
  return verifySameShape(*this, getGate(), "gate", getDup(), "dup");
}

LogicalResult CrossEntropyGradOp::verify() {
  if (tensorOf(getLogits()).getRank() != 3)
    return emitOpError("expects logits [S, B, V], got ")
           << getLogits().getType();
  return verifySameShape(*this, getLogits(), "logits", getDlogits(), "result");
}

LogicalResult FillOp::verify() { return success(); }

LogicalResult AdamWOp::verify() {
  for (auto [value, name] :
       {std::pair{getGrad(), "grad"}, std::pair{getNewParam(), "new_param"}})
    if (failed(verifySameType(*this, getParam(), "param", value, name)))
      return failure();
  if (tensorOf(getM()).getShape() != tensorOf(getParam()).getShape() ||
      getM().getType() != getV().getType())
    return emitOpError("moments must match the parameter's shape and each "
                       "other, got ")
           << getM().getType() << " and " << getV().getType();
  if (getNewM().getType() != getM().getType() ||
      getNewV().getType() != getV().getType())
    return emitOpError("updated moments must keep the moments' types");
  if (failed(verifyMaster()))
    return failure();
  if (static_cast<bool>(getGradNormSq()) != getMaxNorm().has_value())
    return emitOpError("grad_norm_sq and max_norm come together");
  if (getMaxNorm() && !(getMaxNorm()->convertToDouble() > 0))
    return emitOpError("max_norm must be positive, got ")
           << getMaxNorm()->convertToDouble();
  double beta1 = getBeta1().convertToDouble();
  double beta2 = getBeta2().convertToDouble();
  if (beta1 < 0 || beta1 >= 1 || beta2 < 0 || beta2 >= 1)
    return emitOpError("betas must be in [0, 1), got ")
           << beta1 << " and " << beta2;
  return success();
}

/// bf16-mixed: an f32 master of the parameter's shape, f32 moments, and
/// the updated master returned; without a master, moments of the
/// parameter's element type or f32, and no fourth result.
LogicalResult AdamWOp::verifyMaster() {
  Value master = getMaster();
  if (static_cast<bool>(master) != static_cast<bool>(getNewMaster()))
    return emitOpError("a master operand and a new_master result come "
                       "together");
  if (!master)
    return success();
  Type f32 = Float32Type::get(getContext());
  if (tensorOf(master).getElementType() != f32 ||
      tensorOf(master).getShape() != tensorOf(getParam()).getShape())
    return emitOpError("master must be f32 of the parameter's shape, got ")
           << master.getType();
  if (tensorOf(getM()).getElementType() != f32)
    return emitOpError("moments must be f32 with a master, got ")
           << getM().getType();
  if (getNewMaster().getType() != master.getType())
    return emitOpError("the updated master must keep the master's type");
  return success();
}

LogicalResult SumSquaresOp::verify() {
  if (getXs().empty())
    return emitOpError("needs at least one operand");
  if (getReplicas().size() != getXs().size())
    return emitOpError("needs one replicas entry per operand, got ")
           << getReplicas().size() << " for " << getXs().size();
  for (int64_t count : getReplicas())
    if (count < 1)
      return emitOpError("replicas must be >= 1, got ") << count;
  return success();
}

int64_t SumSquaresOp::getFlops() {
  int64_t flops = 0;
  for (Value x : getXs())
    flops += 2 * tensorOf(x).getNumElements();
  return flops;
}
