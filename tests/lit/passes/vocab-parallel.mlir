// RUN: sharc-opt %S/Inputs/block.mlir --sharc-tensor-parallel=tp=2 \
// RUN:   --sharc-vocab-parallel --sharc-spmdize --sharc-autodiff \
// RUN:   --sharc-verify-placements | FileCheck %s
// RUN: sed -e 's/16x8xf32/15x8xf32/g' -e 's/x16xf32/x15xf32/g' \
// RUN:     -e 's/vocab_size = 16/vocab_size = 15/' \
// RUN:     -e 's/valid_vocab = 16/valid_vocab = 15/' %S/Inputs/block.mlir \
// RUN:   | sharc-opt --sharc-tensor-parallel=tp=2 --sharc-vocab-parallel \
// RUN:     --sharc-spmdize | FileCheck %s --check-prefix=PADDED

// The table is split over the vocabulary: a masked local lookup whose
// partial sums are all-reduced; the head is column parallel over the
// vocabulary and the loss comes from all-reduced max, target logit and sum
// of exponentials: three [S, B] all_reduces, no logits gathered. Its
// backward needs no communication.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: tensor<8x8xf32, #sharc.place<tp = S(0)>> {{.*}}sharc.param = "embed"
// CHECK: %[[E:.*]] = sharc.embedding {{.*}} {vocab_axis = "tp"} {{.*}} -> tensor<8x2x8xf32, #sharc.place<tp = P>>
// CHECK-NEXT: sharc.all_reduce %[[E]] {axis = "tp"}
// CHECK: %[[LOGITS:.*]] = sharc.matmul {{.*}} -> tensor<8x2x8xf32, #sharc.place<tp = S(2)>>
// CHECK-NOT: sharc.all_gather
// CHECK: %[[M:.*]] = sharc.vocab_max %[[LOGITS]]
// CHECK-NEXT: %[[MG:.*]] = sharc.all_reduce %[[M]] {axis = "tp", reduce = "max"}
// CHECK-NEXT: %[[T:.*]] = sharc.target_logit %[[LOGITS]]
// CHECK-NEXT: %[[TG:.*]] = sharc.all_reduce %[[T]] {axis = "tp"}
// CHECK-NEXT: %[[S:.*]] = sharc.sum_exp %[[LOGITS]], %[[MG]]
// CHECK-NEXT: %[[SG:.*]] = sharc.all_reduce %[[S]] {axis = "tp"}
// CHECK-NEXT: sharc.vocab_parallel_loss %[[LOGITS]], %{{.*}}, %[[MG]], %[[TG]], %[[SG]]
// CHECK: sharc.fill
// CHECK-NEXT: sharc.vocab_parallel_loss_grad %[[LOGITS]], %{{.*}}, %[[MG]], %[[SG]]
// CHECK: sharc.embedding_grad {{.*}} {vocab_axis = "tp"} {{.*}} -> tensor<8x8xf32, #sharc.place<tp = S(0)>>

// A vocabulary of 15 over tp = 2 is padded to 16 rows, 8 per rank; the
// loss still counts 15 columns.
// PADDED: tensor<8x8xf32, #sharc.place<tp = S(0)>> {{.*}}sharc.param = "embed"
// PADDED: sharc.vocab_max {{.*}} {valid_vocab = 15 : i64, vocab_axis = "tp"}
