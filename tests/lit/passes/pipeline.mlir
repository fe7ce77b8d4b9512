// RUN: sharc-opt %S/Inputs/two-layers.mlir --sharc-declare-axis="name=pp size=2" \
// RUN:   --sharc-pipeline-partition | FileCheck %s --check-prefix=PART
// RUN: sed 's/module attributes {sharc.model = {/module attributes {sharc.model = {num_microbatches = 2 : i64, /' \
// RUN:   %S/Inputs/two-layers.mlir \
// RUN:   | sharc-opt --sharc-declare-axis="name=pp size=2" --sharc-pipeline-partition \
// RUN:     --sharc-autodiff --sharc-microbatch --sharc-pipeline-schedule=schedule=gpipe \
// RUN:   | FileCheck %s --check-prefix=GPIPE
// RUN: sed 's/module attributes {sharc.model = {/module attributes {sharc.model = {num_microbatches = 3 : i64, /; s/8x2x/8x1x/g; s/8x2xi32/8x1xi32/g' \
// RUN:   %S/Inputs/two-layers.mlir \
// RUN:   | sharc-opt --sharc-declare-axis="name=pp size=2" --sharc-pipeline-partition \
// RUN:     --sharc-autodiff --sharc-microbatch --sharc-pipeline-schedule=schedule=1f1b \
// RUN:   | FileCheck %s --check-prefix=ONEF

// Partition: the embedding and layer 0 on stage 0, layer 1, the head and
// the loss on stage 1; the residual stream crosses once, through a
// transfer whose transpose autodiff turns into the backward's.
// PART-LABEL: func.func @train_step
// PART: %[[H:.*]] = sharc.embedding {{.*}}sharc.stage = 0
// PART: %[[R0:.*]] = sharc.add %[[H]], {{.*}}sharc.stage = 0
// PART-NEXT: %[[T:.*]] = sharc.transfer %[[R0]] {axis = "pp", from = 0 : i64, sharc.forward, to = 1 : i64}
// PART-NEXT: sharc.rms_norm %[[T]], {{.*}}sharc.stage = 1
// PART: sharc.add %[[T]], {{.*}}sharc.stage = 1
// PART: sharc.cross_entropy {{.*}}sharc.stage = 1
// PART-NOT: sharc.transfer

// GPipe over 2 microbatches: each stage runs both forwards, then both
// backwards in order (F0 F1 B0 B1); transfers are send/recv pairs, the
// backward's going from stage 1 to stage 0. The label count and the seed
// are on the stage of the loss; the token slices where they are read.
// GPIPE-LABEL: func.func @train_step
// GPIPE: sharc.valid_count {{.*}}sharc.stage = 1
// GPIPE: %[[TOK:.*]]:2 = sharc.split %arg1 {dim = 1 : i64, sharc.stage = 0 : i64}
// GPIPE: sharc.embedding %arg0, %[[TOK]]#0 {sharc.stage = 0 : i64}
// GPIPE: sharc.send %{{.*}} {axis = "pp", peer = 1 : i64, sharc.stage = 0 : i64{{.*}}}
// GPIPE-NEXT: sharc.recv {axis = "pp", peer = 0 : i64, sharc.stage = 1 : i64{{.*}}}
// GPIPE: sharc.embedding %arg0, %[[TOK]]#1 {sharc.stage = 0 : i64}
// GPIPE: sharc.send %{{.*}} {axis = "pp", peer = 1 : i64, sharc.stage = 0 : i64{{.*}}}
// GPIPE: sharc.cross_entropy_grad
// GPIPE: sharc.send %{{.*}} {axis = "pp", peer = 0 : i64, sharc.stage = 1 : i64{{.*}}}
// GPIPE-NEXT: sharc.recv {axis = "pp", peer = 1 : i64, sharc.stage = 0 : i64{{.*}}}
// GPIPE: sharc.embedding_grad %{{.*}}, %[[TOK]]#0 {sharc.stage = 0 : i64}
// GPIPE: sharc.send %{{.*}} {axis = "pp", peer = 0 : i64, sharc.stage = 1 : i64{{.*}}}
// GPIPE: sharc.embedding_grad %{{.*}}, %[[TOK]]#1 {sharc.stage = 0 : i64}
// GPIPE-NOT: sharc.transfer
// GPIPE-NOT: sharc.forward
// GPIPE-NOT: sharc.microbatch

// 1F1B over 3 microbatches: stage 0 warms up with one forward (P - 0 - 1)
// and runs F0 F1 B0 F2 B1 B2; stage 1 alternates, F0 B0 F1 B1 F2 B2.
// ONEF-LABEL: func.func @train_step
// ONEF: %[[TOK:.*]]:3 = sharc.split %arg1
// ONEF: sharc.embedding %arg0, %[[TOK]]#0 {sharc.stage = 0 : i64}
// ONEF: sharc.cross_entropy {{.*}}sharc.stage = 1
// ONEF: sharc.send %{{.*}} {axis = "pp", peer = 0 : i64, sharc.stage = 1 : i64{{.*}}}
// ONEF: sharc.embedding %arg0, %[[TOK]]#1 {sharc.stage = 0 : i64}
// ONEF: sharc.recv {axis = "pp", peer = 1 : i64, sharc.stage = 0 : i64{{.*}}}
// ONEF: sharc.embedding_grad %{{.*}}, %[[TOK]]#0 {sharc.stage = 0 : i64}
// ONEF: sharc.cross_entropy {{.*}}sharc.stage = 1
// ONEF: sharc.embedding %arg0, %[[TOK]]#2 {sharc.stage = 0 : i64}
// ONEF: sharc.embedding_grad %{{.*}}, %[[TOK]]#1 {sharc.stage = 0 : i64}
// ONEF: sharc.cross_entropy {{.*}}sharc.stage = 1
// ONEF: sharc.embedding_grad %{{.*}}, %[[TOK]]#2 {sharc.stage = 0 : i64}

// A second partition is refused: it would stage the transfers of the first.
// RUN: not sharc-opt %S/Inputs/two-layers.mlir --sharc-declare-axis="name=pp size=2" \
// RUN:   --sharc-pipeline-partition --sharc-pipeline-partition 2>&1 \
// RUN:   | FileCheck %s --check-prefix=TWICE
// TWICE: error: the program is already partitioned into pipeline stages (its ops carry sharc.stage)

// Clipping (sharc-adamw on staged ops): each stage sums its own gradients'
// squares (pp adds no replica), its all_reduce over pp comes after the
// stage's last send or recv (here stage 1's backward send, which the sum
// does not wait for), and the stage's updates read that stage's norm.
// RUN: sed 's/module attributes {sharc.model = {/module attributes {sharc.optimizer = {grad_clip = 1.0 : f64}, sharc.model = {/' \
// RUN:   %S/Inputs/two-layers.mlir \
// RUN:   | sharc-opt --sharc-declare-axis="name=pp size=2" --sharc-pipeline-partition \
// RUN:     --sharc-autodiff --sharc-microbatch --sharc-adamw \
// RUN:     --sharc-pipeline-schedule=schedule=gpipe \
// RUN:   | FileCheck %s --check-prefix=CLIP
// CLIP-LABEL: func.func @train_step
// CLIP: %[[S1:.*]] = sharc.sum_squares {{.*}}replicas = array<i64: 1, 1, 1>, sharc.stage = 1
// CLIP: sharc.send {{.*}}peer = 0 : i64, sharc.stage = 1
// CLIP-NEXT: %[[N1:.*]] = sharc.all_reduce %[[S1]] {axis = "pp", sharc.stage = 1
// CLIP-COUNT-3: sharc.adamw {{.*}}, %[[N1]] {beta1
// CLIP: sharc.recv {axis = "pp", peer = 1 : i64, sharc.stage = 0
// CLIP: %[[S0:.*]] = sharc.sum_squares {{.*}}replicas = array<i64: 1, 1, 1>, sharc.stage = 0
// CLIP-NEXT: %[[N0:.*]] = sharc.all_reduce %[[S0]] {axis = "pp", sharc.stage = 0
// CLIP-COUNT-3: sharc.adamw {{.*}}, %[[N0]] {beta1
// CLIP: return {{.*}}, %[[N1]] :

// sharc-adamw stages each stage's norm itself, marked as all of the
// stage's chunks' (an interleaved stage's sum reads every chunk's
// gradients; the schedule must not join the chunks through it). The
// schedule keeps that stage, drops the mark, and refuses a norm whose
// values come from another stage without a transfer.
// RUN: sed 's/module attributes {sharc.model = {/module attributes {sharc.optimizer = {grad_clip = 1.0 : f64}, sharc.model = {/' \
// RUN:   %S/Inputs/two-layers.mlir \
// RUN:   | sharc-opt --sharc-declare-axis="name=pp size=2" --sharc-pipeline-partition \
// RUN:     --sharc-autodiff --sharc-microbatch --sharc-adamw > %t.adamw.mlir
// RUN: FileCheck %s --check-prefix=MARKED < %t.adamw.mlir
// RUN: sharc-opt %t.adamw.mlir --sharc-pipeline-schedule=schedule=gpipe \
// RUN:   | FileCheck %s --check-prefix=CLIP --implicit-check-not=sharc.all_chunks
// RUN: sed '/sum_squares/s/sharc.all_chunks, sharc.stage = 1/sharc.all_chunks, sharc.stage = 0/' %t.adamw.mlir \
// RUN:   | not sharc-opt --sharc-pipeline-schedule=schedule=gpipe 2>&1 \
// RUN:   | FileCheck %s --check-prefix=ACROSS
// MARKED: %[[S:.*]] = sharc.sum_squares {{.*}}{replicas = array<i64: 1, 1, 1>, sharc.all_chunks, sharc.stage = 1 : i64}
// MARKED-NEXT: sharc.all_reduce %[[S]] {axis = "pp", sharc.all_chunks, sharc.stage = 1 : i64}
// MARKED: %[[S:.*]] = sharc.sum_squares {{.*}}{replicas = array<i64: 1, 1, 1>, sharc.all_chunks, sharc.stage = 0 : i64}
// MARKED-NEXT: sharc.all_reduce %[[S]] {axis = "pp", sharc.all_chunks, sharc.stage = 0 : i64}
// ACROSS: error: 'sharc.sum_squares' op runs on stage 0 for all of its chunks but exchanges a value with stage 1 without a transfer
