//===- SharcOps.h - operations of the sharc dialect -------------*- C++ -*-===//
// defines: the ops of SharcOps.td (EmbeddingOp, MatmulOp, ...) and the
//          interfaces ShardingRuleOpInterface, VJPOpInterface and
//          CostOpInterface
#pragma once

#include "ir/SharcAttrs.h"
#include "ir/SharcDialect.h"
#include "ir/ShardingRule.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "ir/SharcInterfaces.h.inc"

#define GET_OP_CLASSES
#include "ir/SharcOps.h.inc"
