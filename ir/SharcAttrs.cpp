//===- SharcAttrs.cpp - attributes of the sharc dialect -------------------===//

#include "ir/SharcAttrs.h"
#include "ir/SharcDialect.h"

#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace sharc;

#define GET_ATTRDEF_CLASSES
#include "ir/SharcAttrs.cpp.inc"

void SharcDialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "ir/SharcAttrs.cpp.inc"
      >();
}

namespace {

void printCode(AsmPrinter &printer, int64_t code) {
  if (code == PlacementAttr::kInvariant)
    printer << "I";
  else if (code == PlacementAttr::kReplicated)
    printer << "R";
  else if (code == PlacementAttr::kPartial)
    printer << "P";
  else
    printer << "S(" << code << ")";
}

ParseResult parseCode(AsmParser &parser, int64_t &code) {
  StringRef keyword;
  if (parser.parseKeyword(&keyword))
    return failure();
  if (keyword == "I")
    code = PlacementAttr::kInvariant;
  else if (keyword == "R")
    code = PlacementAttr::kReplicated;
  else if (keyword == "P")
    code = PlacementAttr::kPartial;
  else if (keyword == "S") {
    if (parser.parseLParen() || parser.parseInteger(code) ||
        parser.parseRParen())
      return failure();
    if (code < 0)
      return parser.emitError(parser.getCurrentLocation(),
                              "shard dimension must be non-negative");
  } else {
    return parser.emitError(parser.getCurrentLocation(),
                            "expected I, R, P or S(dim), got ")
           << keyword;
  }
  return success();
}

} // namespace

Attribute PlacementAttr::parse(AsmParser &parser, Type) {
  int64_t dp = kInvariant, tp = kInvariant;
  if (parser.parseLess())
    return {};
  do {
    StringRef axis;
    if (parser.parseKeyword(&axis) || parser.parseEqual())
      return {};
    int64_t *slot = axis == "dp" ? &dp : axis == "tp" ? &tp : nullptr;
    if (!slot) {
      parser.emitError(parser.getCurrentLocation(), "unknown mesh axis '")
          << axis << "' (expected dp or tp)";
      return {};
    }
    if (parseCode(parser, *slot))
      return {};
  } while (succeeded(parser.parseOptionalComma()));
  if (parser.parseGreater())
    return {};
  return PlacementAttr::get(parser.getContext(), dp, tp);
}

void PlacementAttr::print(AsmPrinter &printer) const {
  printer << "<dp = ";
  printCode(printer, getDp());
  printer << ", tp = ";
  printCode(printer, getTp());
  printer << ">";
}

int64_t PlacementAttr::getAxis(StringRef axis) const {
  return axis == "dp" ? getDp() : getTp();
}

PlacementAttr PlacementAttr::withAxis(StringRef axis, int64_t code) const {
  return axis == "dp" ? PlacementAttr::get(getContext(), code, getTp())
                      : PlacementAttr::get(getContext(), getDp(), code);
}

PlacementAttr sharc::getPlacement(Type type) {
  auto tensor = cast<RankedTensorType>(type);
  if (auto placement = dyn_cast_or_null<PlacementAttr>(tensor.getEncoding()))
    return placement;
  return PlacementAttr::get(type.getContext(), PlacementAttr::kInvariant,
                            PlacementAttr::kInvariant);
}

RankedTensorType sharc::withPlacement(Type type, PlacementAttr placement) {
  auto tensor = cast<RankedTensorType>(type);
  bool invariant = placement.getDp() == PlacementAttr::kInvariant &&
                   placement.getTp() == PlacementAttr::kInvariant;
  return RankedTensorType::get(tensor.getShape(), tensor.getElementType(),
                               invariant ? Attribute() : placement);
}

RankedTensorType sharc::cotangentType(Type primal) {
  PlacementAttr placement = getPlacement(primal);
  auto dual = [](int64_t code) {
    if (code == PlacementAttr::kReplicated)
      return PlacementAttr::kPartial;
    if (code == PlacementAttr::kPartial)
      return PlacementAttr::kInvariant;
    return code;
  };
  return withPlacement(primal, PlacementAttr::get(primal.getContext(),
                                                  dual(placement.getDp()),
                                                  dual(placement.getTp())));
}

std::string sharc::placement::name(int64_t code) {
  if (code == kI)
    return "I";
  if (code == kR)
    return "R";
  if (code == kP)
    return "P";
  return "S(" + std::to_string(code) + ")";
}

std::optional<int64_t> sharc::placement::matmulRule(int64_t x, int64_t w,
                                                    int64_t lastDim) {
  if (x == kR && w == 0)
    return lastDim;
  if (x == lastDim && w == 1)
    return kP;
  if (x == kI && w == kI)
    return kI;
  if (x >= 0 && x != lastDim && (w == kR || w == kI))
    return x;
  return std::nullopt;
}
