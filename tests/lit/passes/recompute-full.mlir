// RUN: sharc-opt %S/Inputs/two-layers.mlir --sharc-autodiff \
// RUN:   --sharc-recompute=policy=full | FileCheck %s
// RUN: sharc-opt %S/Inputs/two-layers.mlir --sharc-declare-axis="name=pp size=2" \
// RUN:   --sharc-pipeline-partition --sharc-autodiff \
// RUN:   --sharc-recompute=policy=full | FileCheck %s --check-prefix=PP
// RUN: sharc-opt %S/Inputs/two-layers.mlir --sharc-autodiff \
// RUN:   --sharc-recompute=policy=none | FileCheck %s --check-prefix=NONE
// RUN: sharc-opt %S/Inputs/two-layers.mlir --sharc-autodiff \
// RUN:   --sharc-recompute=policy=selective | FileCheck %s --check-prefix=SELECTIVE
// RUN: sharc-opt %S/Inputs/two-layers.mlir --sharc-autodiff \
// RUN:   --sharc-recompute="policy=full layers=1 rest=selective" \
// RUN:   | FileCheck %s --check-prefix=MIXED
// RUN: not sharc-opt %S/Inputs/two-layers.mlir --sharc-autodiff \
// RUN:   --sharc-recompute=policy=most 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: not sharc-opt %S/Inputs/two-layers.mlir --sharc-autodiff \
// RUN:   --sharc-recompute="policy=selective rest=selective" 2>&1 \
// RUN:   | FileCheck %s --check-prefix=BADREST

// Full recompute: of each layer only its input (%0 for layer 0, the
// residual %3 for layer 1) lives into the backward. Each layer's norm runs
// again right before the first backward op that reads it (the weight
// gradient), and no backward op reads the forward's norms. The embedding
// and the head are left alone: the head's weight gradient reads the last
// residual, which the step needs anyway.
// CHECK: %[[H:.*]] = sharc.embedding
// CHECK-NEXT: %[[X0:.*]] = sharc.rms_norm %[[H]], %arg3
// CHECK-NEXT: sharc.matmul %[[X0]], %arg4
// CHECK-NEXT: %[[H0:.*]] = sharc.add %[[H]],
// CHECK-NEXT: %[[X1:.*]] = sharc.rms_norm %[[H0]], %arg5
// CHECK: sharc.fill
// CHECK-NOT: %[[X1]]{{[^0-9_]}}
// CHECK: sharc.matmul_dgrad {{.*}}, %arg6
// CHECK-NEXT: %[[RX1:.*]] = sharc.rms_norm %[[H0]], %arg5 {eps = {{.*}}, sharc.recompute = "full"}
// CHECK-NEXT: sharc.matmul_wgrad {{.*}}, %[[RX1]]
// CHECK-NOT: %[[X0]]{{[^0-9_]}}
// CHECK: sharc.matmul_dgrad {{.*}}, %arg4
// CHECK-NEXT: %[[RX0:.*]] = sharc.rms_norm %[[H]], %arg3
// CHECK-NEXT: sharc.matmul_wgrad {{.*}}, %[[RX0]]
// CHECK-NOT: %[[X0]]{{[^0-9_]}}
// CHECK: return

// On pipeline stages a copy keeps its stage and leaves the forward's slot:
// sharc-pipeline-schedule runs it in its microbatch's backward. The
// transfer that brought the layer's input is not run again.
// PP: sharc.rms_norm %0, %arg3 {{{.*}}sharc.forward, sharc.stage = 0
// PP: %[[IN:.*]] = sharc.transfer {{.*}}sharc.forward
// PP: sharc.rms_norm %[[IN]], %arg5 {{{.*}}sharc.forward, sharc.stage = 1
// PP: sharc.fill
// PP-NOT: sharc.transfer {{.*}}sharc.forward
// PP: sharc.rms_norm %[[IN]], %arg5 {eps = {{.*}}, sharc.stage = 1 : i64}
// PP: sharc.rms_norm %0, %arg3 {eps = {{.*}}, sharc.stage = 0 : i64}

// Selective: the norms (cheap, their inputs kept anyway) are re-run right
// before their readers, marked "selective" (the planner's deferral may
// pass them); full recompute's copies are marked "full".
// SELECTIVE: sharc.fill
// SELECTIVE: sharc.matmul_dgrad {{.*}}, %arg6
// SELECTIVE-NEXT: %[[S1:.*]] = sharc.rms_norm %{{.*}}, %arg5 {eps = {{[^,]*}}, sharc.recompute = "selective"} :
// SELECTIVE-NEXT: sharc.matmul_wgrad {{.*}}, %[[S1]]
// SELECTIVE: sharc.matmul_dgrad {{.*}}, %arg4
// SELECTIVE-NEXT: %[[S0:.*]] = sharc.rms_norm %{{.*}}, %arg3 {eps = {{[^,]*}}, sharc.recompute = "selective"} :
// SELECTIVE-NEXT: sharc.matmul_wgrad {{.*}}, %[[S0]]

// The first layer whole, the second selectively.
// MIXED: sharc.fill
// MIXED: sharc.matmul_dgrad {{.*}}, %arg6
// MIXED-NEXT: %[[M1:.*]] = sharc.rms_norm %{{.*}}, %arg5 {eps = {{[^,]*}}, sharc.recompute = "selective"} :
// MIXED-NEXT: sharc.matmul_wgrad {{.*}}, %[[M1]]
// MIXED: sharc.matmul_dgrad {{.*}}, %arg4
// MIXED-NEXT: %[[M0:.*]] = sharc.rms_norm %{{.*}}, %arg3 {eps = {{.*}}, sharc.recompute = "full"}
// MIXED-NEXT: sharc.matmul_wgrad {{.*}}, %[[M0]]

// NONE: sharc.fill
// NONE-NOT: sharc.rms_norm {{.*}} :

// BAD: unknown recompute policy 'most' (expected full, selective, sp-allgather or none)
// BADREST: recompute rest 'selective' needs policy full and is none or selective
