//===- SharcDialect.cpp - the sharc dialect -------------------------------===//

#include "ir/SharcDialect.h"
#include "ir/SharcOps.h"

using namespace mlir;
using namespace sharc;

#include "ir/SharcDialect.cpp.inc"

void SharcDialect::initialize() {
  registerAttributes();
  addOperations<
#define GET_OP_LIST
#include "ir/SharcOps.cpp.inc"
      >();
}
