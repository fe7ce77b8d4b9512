//===- SharcDialect.h - the sharc dialect -----------------------*- C++ -*-===//
// defines: sharc::SharcDialect
#pragma once

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Dialect.h"

#include "ir/SharcDialect.h.inc"
