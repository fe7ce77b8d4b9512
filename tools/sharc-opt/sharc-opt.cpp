//===- sharc-opt.cpp - run sharc passes on .mlir files --------------------===//
//
// mlir-opt with the sharc dialect and passes registered: how passes are
// tested (lit + FileCheck) and how a developer replays part of a pipeline.
//
//===----------------------------------------------------------------------===//

#include "ir/SharcDialect.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  registry.insert<sharc::SharcDialect, mlir::func::FuncDialect>();
  sharc::registerSharcPasses();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "sharc pass driver\n", registry));
}
