//===- Passes.td - the passes of sharc ---------------------*- tablegen -*-===//

#ifndef SHARC_PASSES_TD
#define SHARC_PASSES_TD

include "mlir/Pass/PassBase.td"

def Autodiff : Pass<"sharc-autodiff", "::mlir::ModuleOp"> {
  let summary = "derive the backward from each op's VJP";
  let description = [{
    Reverse-mode differentiation of every function whose result carries
    `sharc.output = "loss"`. Walks the ops backwards from the seed
    `d loss = 1` (a `sharc.fill`), asks each op for the cotangents of its
    operands through `VJPOpInterface`, and sums the cotangents of values
    used more than once with `sharc.add`. Every argument marked
    `sharc.param` gets its gradient appended to the results as
    `sharc.output = "grad:<name>"`.

    Before: `func @f(%w {sharc.param = "w"}, ...) -> (loss)`.
    After: `func @f(%w, ...) -> (loss, grad:w)`.
  }];
}

def AdamW : Pass<"sharc-adamw", "::mlir::ModuleOp"> {
  let summary = "add the AdamW update of every parameter";
  let description = [{
    For each `grad:<name>` result, adds two moment arguments
    (`sharc.state = "m:<name>"` and `"v:<name>"`, zero at the start, the
    parameter's element type as the original's pure low-precision training),
    a `sharc.adamw` op, and returns the updated parameter and moments with
    `sharc.update_of = <argument index>` so the planner writes them in place.
    The gradient results are dropped. Hyperparameters come from the module's
    `sharc.optimizer` dictionary (written by the builder from the run
    config).
  }];
}

#endif // SHARC_PASSES_TD
