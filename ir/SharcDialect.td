//===- SharcDialect.td - the sharc dialect -----------------*- tablegen -*-===//
//
// The dialect of sharc programs: dense Transformer training steps on ranked
// tensors (bf16, f32, i32), later sharded over a device mesh.
//
//===----------------------------------------------------------------------===//

#ifndef SHARC_DIALECT_TD
#define SHARC_DIALECT_TD

include "mlir/IR/OpBase.td"

def Sharc_Dialect : Dialect {
  let name = "sharc";
  let cppNamespace = "::sharc";
  let summary = "Transformer training steps for sharding and planning";
  let description = [{
    Values are builtin ranked tensors. Activations are sequence-first,
    `[S, B, X]`; weights are `[out, in]`. Function arguments carry
    `sharc.param`, `sharc.input` or `sharc.state` attributes naming the
    tensor they hold, results carry `sharc.output`.
  }];
  let dependentDialects = ["::mlir::func::FuncDialect"];
  let useDefaultAttributePrinterParser = 1;
  let extraClassDeclaration = [{
    void registerAttributes();
  }];
}

class Sharc_Op<string mnemonic, list<Trait> traits = []>
    : Op<Sharc_Dialect, mnemonic, traits>;

#endif // SHARC_DIALECT_TD
