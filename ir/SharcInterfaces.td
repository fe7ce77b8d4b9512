//===- SharcInterfaces.td - sharc op interfaces ------------*- tablegen -*-===//
//
// Behaviour that generic passes call: the VJP (autodiff) and the cost
// (planner). A new op implements these instead of touching the passes.
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
