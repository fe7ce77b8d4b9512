//===- SharcAttrs.cpp - the mesh and placement attributes -----------------===//

#include "ir/SharcAttrs.h"
#include "ir/ArgumentRoles.h"
#include "ir/SharcDialect.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
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

/// The default nesting of the axes sharc knows, outermost first; other
/// axes go innermost, in the order they are added.
constexpr llvm::StringLiteral kDefaultNesting[] = {"dp", "pp", "cp", "tp"};

int64_t nestingRank(StringRef axis) {
  for (auto [rank, name] : llvm::enumerate(kDefaultNesting))
    if (name == axis)
      return static_cast<int64_t>(rank);
  return std::size(kDefaultNesting);
}

ParseResult parseCode(AsmParser &parser, int64_t &code) {
  StringRef keyword;
  if (parser.parseKeyword(&keyword))
    return failure();
  if (keyword == "I") {
    code = PlacementAttr::kInvariant;
  } else if (keyword == "R") {
    code = PlacementAttr::kReplicated;
  } else if (keyword == "P") {
    code = PlacementAttr::kPartial;
    if (succeeded(parser.parseOptionalLParen())) {
      StringRef kind;
      if (parser.parseKeyword(&kind))
        return failure();
      if (kind == "max")
        code = PlacementAttr::kPartialMax;
      else if (kind != "sum")
        return parser.emitError(parser.getCurrentLocation(),
                                "expected P(sum) or P(max), got P(")
               << kind << ")";
      if (parser.parseRParen())
        return failure();
    }
  } else if (keyword == "S") {
    if (parser.parseLParen() || parser.parseInteger(code) ||
        parser.parseRParen())
      return failure();
    if (code < 0)
      return parser.emitError(parser.getCurrentLocation(),
                              "shard dimension must be non-negative");
  } else {
    return parser.emitError(parser.getCurrentLocation(),
                            "expected I, R, P, P(max) or S(dim), got ")
           << keyword;
  }
  return success();
}

/// Parses `<name = X, ...>` (or `<>`), calling `parseValue` after each `=`
/// and refusing a name given twice.
ParseResult parseAxisList(AsmParser &parser, SmallVectorImpl<StringRef> &names,
                          llvm::function_ref<ParseResult(int64_t &)> parseValue,
                          SmallVectorImpl<int64_t> &values) {
  if (parser.parseLess())
    return failure();
  if (succeeded(parser.parseOptionalGreater()))
    return success();
  do {
    StringRef axis;
    int64_t value;
    SMLoc where = parser.getCurrentLocation();
    if (parser.parseKeyword(&axis) || parser.parseEqual() || parseValue(value))
      return failure();
    if (llvm::is_contained(names, axis))
      return parser.emitError(where, "mesh axis '") << axis << "' given twice";
    names.push_back(axis);
    values.push_back(value);
  } while (succeeded(parser.parseOptionalComma()));
  return parser.parseGreater();
}

} // namespace

//===----------------------------------------------------------------------===//
// MeshAttr
//===----------------------------------------------------------------------===//

Attribute MeshAttr::parse(AsmParser &parser, Type) {
  SmallVector<StringRef> names;
  SmallVector<int64_t> sizes;
  if (parseAxisList(
          parser, names,
          [&](int64_t &size) { return parser.parseInteger(size); }, sizes))
    return {};
  SmallVector<StringAttr> axes;
  for (StringRef name : names)
    axes.push_back(StringAttr::get(parser.getContext(), name));
  return MeshAttr::getChecked(
      [&] { return parser.emitError(parser.getNameLoc()); },
      parser.getContext(), axes, sizes);
}

void MeshAttr::print(AsmPrinter &printer) const {
  printer << "<";
  llvm::interleaveComma(
      llvm::zip(getAxes(), getSizes()), printer, [&](auto axis) {
        printer << std::get<0>(axis).getValue() << " = " << std::get<1>(axis);
      });
  printer << ">";
}

LogicalResult MeshAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                               ArrayRef<StringAttr> axes,
                               ArrayRef<int64_t> sizes) {
  if (axes.size() != sizes.size())
    return emitError() << "mesh has " << axes.size() << " axes and "
                       << sizes.size() << " sizes";
  for (auto [index, axis] : llvm::enumerate(axes)) {
    if (sizes[index] < 1)
      return emitError() << "mesh axis '" << axis.getValue()
                         << "' must have size at least 1, got " << sizes[index];
    if (llvm::count(axes, axis) > 1)
      return emitError() << "mesh axis '" << axis.getValue() << "' given twice";
  }
  return success();
}

int64_t MeshAttr::indexOf(StringRef axis) const {
  for (auto [index, name] : llvm::enumerate(getAxes()))
    if (name.getValue() == axis)
      return static_cast<int64_t>(index);
  return -1;
}

int64_t MeshAttr::getSize(StringRef axis) const {
  int64_t index = indexOf(axis);
  return index < 0 ? 1 : getSizes()[index];
}

int64_t MeshAttr::getNumRanks() const {
  int64_t ranks = 1;
  for (int64_t size : getSizes())
    ranks *= size;
  return ranks;
}

MeshAttr MeshAttr::withAxisSize(StringRef axis, int64_t size) const {
  SmallVector<StringAttr> axes(getAxes());
  SmallVector<int64_t> sizes(getSizes());
  if (int64_t index = indexOf(axis); index >= 0) {
    sizes[index] = size;
  } else {
    auto *at = llvm::find_if(axes, [&](StringAttr other) {
      return nestingRank(other.getValue()) > nestingRank(axis);
    });
    sizes.insert(sizes.begin() + (at - axes.begin()), size);
    axes.insert(at, StringAttr::get(getContext(), axis));
  }
  return MeshAttr::get(getContext(), axes, sizes);
}

MeshAttr MeshAttr::getDefault(MLIRContext *context) {
  // A pass may ask a module holding no sharc op, whose context has not
  // loaded the dialect (and so cannot make its attributes) yet.
  context->getOrLoadDialect<SharcDialect>();
  return MeshAttr::get(
      context, {StringAttr::get(context, "dp"), StringAttr::get(context, "tp")},
      {1, 1});
}

MeshAttr sharc::getMesh(Operation *op) {
  auto module =
      isa<ModuleOp>(op) ? cast<ModuleOp>(op) : op->getParentOfType<ModuleOp>();
  if (module)
    if (auto mesh = module->getAttrOfType<MeshAttr>(kMeshAttr))
      return mesh;
  return MeshAttr::getDefault(op->getContext());
}

void sharc::setMesh(ModuleOp module, MeshAttr mesh) {
  module->setAttr(kMeshAttr, mesh);
}

SmallVector<StringRef> sharc::splitAxes(StringRef axisList) {
  SmallVector<StringRef> axes;
  axisList.split(axes, ',');
  return axes;
}

std::string sharc::joinAxes(ArrayRef<StringRef> axes) {
  return llvm::join(axes, ",");
}

//===----------------------------------------------------------------------===//
// PlacementAttr
//===----------------------------------------------------------------------===//

Attribute PlacementAttr::parse(AsmParser &parser, Type) {
  SmallVector<std::pair<StringRef, int64_t>> entries;
  SmallVector<StringRef> order;
  if (parser.parseLess())
    return {};
  if (succeeded(parser.parseOptionalGreater()))
    return PlacementAttr::make(parser.getContext(), entries);
  do {
    StringRef axis;
    SMLoc where = parser.getCurrentLocation();
    if (parser.parseKeyword(&axis) || parser.parseEqual())
      return {};
    if (axis == "order") {
      if (parser.parseCommaSeparatedList(AsmParser::Delimiter::Square,
                                         [&]() -> ParseResult {
                                           StringRef name;
                                           if (parser.parseKeyword(&name))
                                             return failure();
                                           order.push_back(name);
                                           return success();
                                         }))
        return {};
      continue;
    }
    int64_t code;
    if (parseCode(parser, code))
      return {};
    if (llvm::any_of(entries,
                     [&](auto entry) { return entry.first == axis; })) {
      parser.emitError(where, "mesh axis '") << axis << "' given twice";
      return {};
    }
    entries.push_back({axis, code});
  } while (succeeded(parser.parseOptionalComma()));
  if (parser.parseGreater())
    return {};
  SmallVector<StringAttr> axes, orderAttrs;
  SmallVector<int64_t> codes;
  llvm::sort(entries, [](auto a, auto b) { return a.first < b.first; });
  for (auto [axis, code] : entries)
    if (code != kInvariant) {
      axes.push_back(StringAttr::get(parser.getContext(), axis));
      codes.push_back(code);
    }
  for (StringRef axis : order)
    orderAttrs.push_back(StringAttr::get(parser.getContext(), axis));
  // Checked as written, then made canonical (a default order is dropped).
  if (failed(PlacementAttr::verify(
          [&] { return parser.emitError(parser.getNameLoc()); }, axes, codes,
          orderAttrs)))
    return {};
  return PlacementAttr::make(parser.getContext(), entries, order);
}

void PlacementAttr::print(AsmPrinter &printer) const {
  printer << "<";
  llvm::interleaveComma(llvm::zip(getAxes(), getCodes()), printer,
                        [&](auto entry) {
                          printer << std::get<0>(entry).getValue() << " = "
                                  << placement::name(std::get<1>(entry));
                        });
  if (!getOrder().empty()) {
    printer << ", order = [";
    llvm::interleaveComma(getOrder(), printer,
                          [&](StringAttr axis) { printer << axis.getValue(); });
    printer << "]";
  }
  printer << ">";
}

LogicalResult
PlacementAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                      ArrayRef<StringAttr> axes, ArrayRef<int64_t> codes,
                      ArrayRef<StringAttr> order) {
  if (axes.size() != codes.size())
    return emitError() << "placement has " << axes.size() << " axes and "
                       << codes.size() << " codes";
  for (size_t i = 0; i < axes.size(); ++i) {
    if (codes[i] < kPartialMax || codes[i] == kInvariant)
      return emitError() << "placement on '" << axes[i].getValue()
                         << "' has no kind (code " << codes[i] << ")";
    if (i > 0 && axes[i - 1].getValue() >= axes[i].getValue())
      return emitError() << "placement axes must be unique and sorted";
  }
  auto codeOf = [&](StringAttr axis) -> int64_t {
    for (auto [name, code] : llvm::zip(axes, codes))
      if (name == axis)
        return code;
    return kInvariant;
  };
  for (StringAttr axis : order) {
    int64_t dim = codeOf(axis);
    if (dim < 0)
      return emitError() << "order names '" << axis.getValue()
                         << "', which splits no dimension";
    if (llvm::count(order, axis) > 1)
      return emitError() << "order names '" << axis.getValue() << "' twice";
    // A stated dimension lists all its axes, so no default fills a gap.
    int64_t listed = llvm::count_if(
        order, [&](StringAttr other) { return codeOf(other) == dim; });
    if (listed != llvm::count(codes, dim) || listed < 2)
      return emitError() << "order must list every axis splitting dimension "
                         << dim << " (" << llvm::count(codes, dim)
                         << ", at least 2), got " << listed;
  }
  return success();
}

/// As a tensor's encoding: every split dimension exists, and an
/// all-invariant placement is no encoding (so equal types compare equal).
LogicalResult PlacementAttr::verifyEncoding(
    ArrayRef<int64_t> shape, Type,
    function_ref<InFlightDiagnostic()> emitError) const {
  if (isInvariant())
    return emitError() << "an invariant placement is written as no encoding";
  for (auto [axis, code] : llvm::zip(getAxes(), getCodes()))
    if (code >= static_cast<int64_t>(shape.size()))
      return emitError() << "placement splits dimension " << code << " over "
                         << axis.getValue() << " but the tensor has rank "
                         << shape.size();
  return success();
}

PlacementAttr
PlacementAttr::make(MLIRContext *context,
                    ArrayRef<std::pair<StringRef, int64_t>> entries,
                    ArrayRef<StringRef> order) {
  SmallVector<std::pair<StringRef, int64_t>> kept;
  for (auto entry : entries)
    if (entry.second != kInvariant)
      kept.push_back(entry);
  llvm::sort(kept, [](auto a, auto b) { return a.first < b.first; });
  SmallVector<StringAttr> axes;
  SmallVector<int64_t> codes;
  for (auto [axis, code] : kept) {
    axes.push_back(StringAttr::get(context, axis));
    codes.push_back(code);
  }
  auto codeOf = [&](StringRef axis) {
    for (auto [name, code] : kept)
      if (name == axis)
        return code;
    return kInvariant;
  };
  // Keep a dimension's stated order only where it is complete and differs
  // from the default nesting.
  SmallVector<StringAttr> stated;
  for (StringRef axis : order) {
    int64_t dim = codeOf(axis);
    if (dim < 0)
      continue;
    SmallVector<StringRef> ofDim;
    for (StringRef other : order)
      if (codeOf(other) == dim)
        ofDim.push_back(other);
    bool isDefault = llvm::is_sorted(ofDim, [](StringRef a, StringRef b) {
      return nestingRank(a) < nestingRank(b);
    });
    if (!isDefault &&
        static_cast<int64_t>(ofDim.size()) == llvm::count(codes, dim))
      stated.push_back(StringAttr::get(context, axis));
  }
  return PlacementAttr::get(context, axes, codes, stated);
}

PlacementAttr PlacementAttr::getInvariant(MLIRContext *context) {
  return PlacementAttr::get(context, {}, {}, {});
}

int64_t PlacementAttr::getAxis(StringRef axis) const {
  for (auto [name, code] : llvm::zip(getAxes(), getCodes()))
    if (name.getValue() == axis)
      return code;
  return kInvariant;
}

SmallVector<StringRef> PlacementAttr::splitOrder(int64_t dim) const {
  SmallVector<StringRef> axes;
  for (StringAttr axis : getOrder())
    if (getAxis(axis.getValue()) == dim)
      axes.push_back(axis.getValue());
  if (!axes.empty())
    return axes;
  for (auto [name, code] : llvm::zip(getAxes(), getCodes()))
    if (code == dim)
      axes.push_back(name.getValue());
  llvm::stable_sort(axes, [](StringRef a, StringRef b) {
    return nestingRank(a) < nestingRank(b);
  });
  return axes;
}

PlacementAttr PlacementAttr::withAxis(StringRef axis, int64_t code) const {
  if (getAxis(axis) == code)
    return *this;
  SmallVector<std::pair<StringRef, int64_t>> entries;
  for (auto [name, old] : llvm::zip(getAxes(), getCodes()))
    if (name.getValue() != axis)
      entries.push_back({name.getValue(), old});
  entries.push_back({axis, code});
  // Every dimension keeps its order; the new split goes innermost.
  SmallVector<StringRef> order;
  for (StringAttr name : getOrder())
    if (name.getValue() != axis && getAxis(name.getValue()) != code)
      order.push_back(name.getValue());
  if (code >= 0) {
    for (StringRef other : splitOrder(code))
      if (other != axis)
        order.push_back(other);
    order.push_back(axis);
  }
  return make(getContext(), entries, order);
}

PlacementAttr sharc::getPlacement(Type type) {
  auto tensor = cast<RankedTensorType>(type);
  if (auto placement = dyn_cast_or_null<PlacementAttr>(tensor.getEncoding()))
    return placement;
  return PlacementAttr::getInvariant(type.getContext());
}

RankedTensorType sharc::withPlacement(Type type, PlacementAttr placement) {
  auto tensor = cast<RankedTensorType>(type);
  return RankedTensorType::get(tensor.getShape(), tensor.getElementType(),
                               placement.isInvariant() ? Attribute()
                                                       : placement);
}

RankedTensorType sharc::cotangentType(Type primal) {
  PlacementAttr placement = getPlacement(primal);
  SmallVector<std::pair<StringRef, int64_t>> entries;
  for (auto [axis, code] :
       llvm::zip(placement.getAxes(), placement.getCodes())) {
    // Each rank's use of a replicated value contributes a part of its
    // cotangent; every summand of a partial sum gets the whole one.
    int64_t dual =
        code == PlacementAttr::kReplicated ? PlacementAttr::kPartial
        : code == PlacementAttr::kPartial || code == PlacementAttr::kPartialMax
            ? PlacementAttr::kInvariant
            : code;
    entries.push_back({axis.getValue(), dual});
  }
  SmallVector<StringRef> order;
  for (StringAttr axis : placement.getOrder())
    order.push_back(axis.getValue());
  return withPlacement(
      primal, PlacementAttr::make(primal.getContext(), entries, order));
}

std::string sharc::placement::name(int64_t code) {
  if (code == kI)
    return "I";
  if (code == kR)
    return "R";
  if (code == kP)
    return "P";
  if (code == kPMax)
    return "P(max)";
  return "S(" + std::to_string(code) + ")";
}

SmallVector<StringRef> sharc::placement::axesSplitting(PlacementAttr placement,
                                                       int64_t dim,
                                                       MeshAttr mesh) {
  SmallVector<StringRef> axes;
  for (StringAttr axis : placement.getOrder())
    if (placement.getAxis(axis.getValue()) == dim)
      axes.push_back(axis.getValue());
  if (!axes.empty())
    return axes; // the stated order
  for (StringAttr axis : mesh.getAxes())
    if (placement.getAxis(axis.getValue()) == dim)
      axes.push_back(axis.getValue());
  // Axes the mesh does not list come last, in name order (a verifier
  // names them).
  for (StringAttr axis : placement.getAxes())
    if (!mesh.hasAxis(axis.getValue()) &&
        placement.getAxis(axis.getValue()) == dim)
      axes.push_back(axis.getValue());
  return axes;
}

PlacementAttr sharc::placement::withSplitOrder(PlacementAttr placement,
                                               int64_t dim,
                                               ArrayRef<StringRef> outerFirst,
                                               MeshAttr mesh) {
  SmallVector<std::pair<StringRef, int64_t>> entries;
  for (auto [axis, code] : llvm::zip(placement.getAxes(), placement.getCodes()))
    entries.push_back({axis.getValue(), code});
  SmallVector<StringRef> order;
  for (StringAttr axis : placement.getOrder())
    if (placement.getAxis(axis.getValue()) != dim)
      order.push_back(axis.getValue());
  // Only an order the mesh would not give is stated.
  SmallVector<StringRef> meshOrder;
  for (StringAttr axis : mesh.getAxes())
    if (llvm::is_contained(outerFirst, axis.getValue()))
      meshOrder.push_back(axis.getValue());
  if (meshOrder != SmallVector<StringRef>(outerFirst))
    order.append(outerFirst.begin(), outerFirst.end());
  return PlacementAttr::make(placement.getContext(), entries, order);
}

int64_t sharc::placement::splitFactor(PlacementAttr placement, int64_t dim,
                                      MeshAttr mesh) {
  int64_t factor = 1;
  for (StringRef axis : axesSplitting(placement, dim, mesh))
    factor *= mesh.getSize(axis);
  return factor;
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
