//===- ArgumentRoles.h - names of function arguments and results -*- C++ -*-===//
// defines: kParamAttr, kInputAttr, kStateAttr, kOutputAttr, kUpdateOfAttr,
//          kInitAttr, kInitStdAttr, kOptimizerAttr, kModelAttr,
//          getArgName, getResultName
//
// A train-step function says what each argument and result is through
// string attributes; passes and the planner look them up here.
#pragma once

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace sharc {

inline constexpr llvm::StringLiteral kParamAttr = "sharc.param";
inline constexpr llvm::StringLiteral kInputAttr = "sharc.input";
inline constexpr llvm::StringLiteral kStateAttr = "sharc.state";
inline constexpr llvm::StringLiteral kOutputAttr = "sharc.output";
inline constexpr llvm::StringLiteral kUpdateOfAttr = "sharc.update_of";
inline constexpr llvm::StringLiteral kInitAttr = "sharc.init";
inline constexpr llvm::StringLiteral kInitStdAttr = "sharc.init_std";
inline constexpr llvm::StringLiteral kOptimizerAttr = "sharc.optimizer";
inline constexpr llvm::StringLiteral kModelAttr = "sharc.model";

/// The string value of `attrName` on argument `index`, or "".
inline llvm::StringRef getArgString(mlir::func::FuncOp func, unsigned index,
                                    llvm::StringRef attrName) {
  if (auto attr = func.getArgAttrOfType<mlir::StringAttr>(index, attrName))
    return attr.getValue();
  return "";
}

/// The string value of `attrName` on result `index`, or "".
inline llvm::StringRef getResultString(mlir::func::FuncOp func,
                                       unsigned index,
                                       llvm::StringRef attrName) {
  if (auto attr =
          func.getResultAttrOfType<mlir::StringAttr>(index, attrName))
    return attr.getValue();
  return "";
}

} // namespace sharc
