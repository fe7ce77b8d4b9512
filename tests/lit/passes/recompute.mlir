// RUN: sharc-opt %S/Inputs/block.mlir --sharc-tensor-parallel=tp=2 \
// RUN:   --sharc-sequence-parallel --sharc-spmdize --sharc-autodiff \
// RUN:   --sharc-recompute=policy=sp-allgather | FileCheck %s
// RUN: sharc-opt %S/Inputs/block.mlir --sharc-tensor-parallel=tp=2 \
// RUN:   --sharc-sequence-parallel --sharc-spmdize --sharc-autodiff \
// RUN:   --sharc-recompute=policy=none | FileCheck %s --check-prefix=NONE

// Megatron SP (the original's SP + Async): the weight gradients of q and k
// use a fresh all_gather of the local norm output, so the forward's
// gathered tensor dies after the forward GEMMs. The gather starts before
// the input-gradient GEMM of the same output gradient.
// CHECK: %[[X:.*]] = sharc.rms_norm
// CHECK-NEXT: %[[G:.*]] = sharc.all_gather %[[X]]
// CHECK: sharc.fill
// CHECK-NOT: sharc.matmul_wgrad {{.*}}, %[[G]] :
// CHECK: %[[REGATHER:.*]] = sharc.all_gather %[[X]] {axis = "tp", dim = 0 : i64, sharc.recompute = "sp-allgather"}
// CHECK-NEXT: sharc.matmul_dgrad
// CHECK-NEXT: sharc.matmul_wgrad {{.*}}, %[[REGATHER]] :
// CHECK: sharc.matmul_wgrad {{.*}}, %[[REGATHER]] :
// CHECK-NOT: sharc.matmul_wgrad {{.*}}, %[[G]] :

// Without the policy, the forward's gathered tensor is kept for them.
// NONE: %[[X:.*]] = sharc.rms_norm
// NONE-NEXT: %[[G:.*]] = sharc.all_gather %[[X]]
// NONE: sharc.matmul_wgrad {{.*}}, %[[G]] :
// NONE: sharc.matmul_wgrad {{.*}}, %[[G]] :
