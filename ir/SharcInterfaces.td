//===- SharcInterfaces.td - sharc op interfaces ------------*- tablegen -*-===//
//
// Behaviour that generic passes call: the sharding rule (spmdize), the
// VJP (autodiff) and the cost (planner). A new op implements these instead of touching the passes.
//
//===----------------------------------------------------------------------===//

#ifndef SHARC_INTERFACES_TD
#define SHARC_INTERFACES_TD

include "mlir/IR/OpBase.td"

def Sharc_VJPOpInterface : OpInterface<"VJPOpInterface"> {
  let cppNamespace = "::sharc";
  let description = [{
    Reverse-mode derivative of an op. Given the cotangent of each result
    (null where no gradient flows), builds the ops computing the cotangent
    of each operand at the builder's insertion point and returns them, one
    per operand (null where the operand is not differentiable, such as
    token ids).
  }];
  let methods = [
    InterfaceMethod<"Builds the cotangents of the operands.",
      "::mlir::FailureOr<::llvm::SmallVector<::mlir::Value>>", "buildVJP",
      (ins "::mlir::OpBuilder &":$builder,
           "::llvm::ArrayRef<::mlir::Value>":$resultGrads)>,
  ];
}

def Sharc_ShardingRuleOpInterface : OpInterface<"ShardingRuleOpInterface"> {
  let cppNamespace = "::sharc";
  let description = [{
    How an op runs on a mesh, one axis at a time (ir/ShardingRule.h): from
    the codes its local operands have on an axis, the codes it needs them
    in and the codes of its results, or failure where it has no case.
    sharc-spmdize asks this rule for every axis, reshards the operands, and
    calls buildSharded; it never switches on op types, so a new op needs
    its rule and nothing in spmdize.
  }];
  let methods = [
    InterfaceMethod<"The rule on one mesh axis.", "::mlir::LogicalResult",
      "getAxisRule",
      (ins "const ::sharc::AxisQuery &":$query, "::sharc::AxisRule &":$rule),
      [{}], [{
        // Elementwise by default: every operand as the first one (a
        // partial sum first brought to the activation placement).
        int64_t code = query.operands.front();
        for (int64_t other : query.operands)
          if (other == ::sharc::placement::kP)
            code = query.activation;
        if (code == ::sharc::placement::kP ||
            code == ::sharc::placement::kPMax)
          return ::mlir::failure();
        rule.operands.assign(query.operands.size(), code);
        rule.results.assign($_op->getNumResults(), code);
        return ::mlir::success();
      }]>,
    InterfaceMethod<[{
        Builds the op on local operands (already in the placements the rule
        asked for) at the builder's insertion point, returning the values
        standing for its results.
      }], "::mlir::FailureOr<::llvm::SmallVector<::mlir::Value>>",
      "buildSharded",
      (ins "::mlir::OpBuilder &":$builder, "::mlir::ValueRange":$operands),
      [{}], [{
        // The results take the first operand's local type (the ops whose
        // results match their operands).
        ::mlir::OperationState state($_op->getLoc(), $_op->getName());
        state.addOperands(operands);
        state.addAttributes($_op->getAttrs());
        state.addTypes(::llvm::SmallVector<::mlir::Type>(
            $_op->getNumResults(), operands.front().getType()));
        ::mlir::Operation *built = builder.create(state);
        return ::llvm::SmallVector<::mlir::Value>(built->getResults());
      }]>,
  ];
}

def Sharc_CostOpInterface : OpInterface<"CostOpInterface"> {
  let cppNamespace = "::sharc";
  let description = [{
    The work of one execution of an op on one rank: floating-point
    operations and the fewest bytes it must move through memory.
  }];
  let methods = [
    InterfaceMethod<"Floating-point operations.", "int64_t", "getFlops",
      (ins), [{}], [{
        // Elementwise by default: one operation per result element.
        int64_t flops = 0;
        for (::mlir::Type type : $_op->getResultTypes())
          if (auto tensor = ::llvm::dyn_cast<::mlir::RankedTensorType>(type))
            flops += tensor.getNumElements();
        return flops;
      }]>,
  ];
}

#endif // SHARC_INTERFACES_TD
