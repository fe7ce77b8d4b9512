//===- Layout.cpp - the layout a module asks for, read and written --------===//

#include "passes/Layout.h"

#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace sharc;

Layout sharc::readLayout(ModuleOp module) {
  Layout layout;
  layout.mesh = getMesh(module);
  layout.sequenceParallel = module->hasAttr(kSequenceParallelAttr);
  if (auto axis = module->getAttrOfType<StringAttr>(kSequenceParallelAttr))
    layout.sequenceParallelAxis = axis.getValue();
  layout.vocabParallel = module->hasAttr(kVocabParallelAttr);
  return layout;
}

void sharc::setMeshSize(ModuleOp module, StringRef axis, int64_t size) {
  setMesh(module, getMesh(module).withAxisSize(axis, size));
}

ModelSizes::ModelSizes(ModuleOp module) : module(module) {
  sizes = module->getAttrOfType<DictionaryAttr>(kModelAttr);
  places = module->getAttrOfType<DictionaryAttr>(kModelLocsAttr);
}

int64_t ModelSizes::get(StringRef key) const {
  if (!sizes)
    return 0;
  auto value = sizes.getAs<IntegerAttr>(key);
  return value ? value.getInt() : 0;
}

Location ModelSizes::loc(StringRef key) const {
  if (places)
    if (auto where = places.getAs<LocationAttr>(key))
      return where;
  return module.getLoc();
}

LogicalResult ModelSizes::requireDivides(StringRef axis, int64_t n,
                                         StringRef key) const {
  int64_t value = get(key);
  if (value % n == 0)
    return success();
  return emitError(loc(key)) << axis << " (" << n << ") must divide " << key
                             << " (" << value << ")";
}

void sharc::forEachParam(
    ModuleOp module,
    const std::function<void(func::FuncOp, unsigned, StringRef)> &fn) {
  for (auto func : module.getOps<func::FuncOp>())
    for (unsigned i = 0; i < func.getNumArguments(); ++i)
      if (!getArgString(func, i, kParamAttr).empty())
        fn(func, i, getArgString(func, i, kRoleAttr));
}

PlacementAttr sharc::getParamPlacement(func::FuncOp func, unsigned index) {
  if (auto placement =
          func.getArgAttrOfType<PlacementAttr>(index, kPlacementAttr))
    return placement;
  return PlacementAttr::getInvariant(func.getContext());
}

void sharc::setParamPlacement(func::FuncOp func, unsigned index, StringRef axis,
                              int64_t code) {
  func.setArgAttr(index, kPlacementAttr,
                  getParamPlacement(func, index).withAxis(axis, code));
}
