// RUN: sharc-opt %S/Inputs/attention-block.mlir \
// RUN:   "--sharc-context-parallel=cp=2 split=contiguous" \
// RUN:   --sharc-spmdize --sharc-autodiff --sharc-verify-placements \
// RUN:   | FileCheck %s --check-prefix=A2A
// RUN: sharc-opt %S/Inputs/attention-block.mlir \
// RUN:   "--sharc-context-parallel=cp=2 comm=all_gather split=contiguous" \
// RUN:   --sharc-spmdize --sharc-autodiff --sharc-verify-placements \
// RUN:   | FileCheck %s --check-prefix=GATHER
// RUN: sharc-opt %S/Inputs/attention-block.mlir --sharc-tensor-parallel=tp=2 \
// RUN:   --sharc-sequence-parallel \
// RUN:   "--sharc-context-parallel=cp=2 split=contiguous" \
// RUN:   --sharc-spmdize | FileCheck %s --check-prefix=TPCP
// RUN: sharc-opt %S/Inputs/attention-block.mlir --sharc-tensor-parallel=tp=2 \
// RUN:   --sharc-sequence-parallel --sharc-context-parallel=cp=2 \
// RUN:   --sharc-spmdize --sharc-autodiff --sharc-verify-placements \
// RUN:   | FileCheck %s --check-prefix=TPCPSTEP
// RUN: sharc-opt %S/Inputs/attention-block.mlir --sharc-data-parallel=dp=2 \
// RUN:   --sharc-context-parallel=cp=2 --sharc-spmdize --sharc-autodiff \
// RUN:   --sharc-bucket-gradients | FileCheck %s --check-prefix=DPCP
// RUN: sharc-opt %S/Inputs/attention-block.mlir --sharc-context-parallel=cp=2 \
// RUN:   --sharc-spmdize --sharc-autodiff --sharc-verify-placements \
// RUN:   | FileCheck %s --check-prefix=BALA2A
// RUN: sharc-opt %S/Inputs/attention-block.mlir \
// RUN:   "--sharc-context-parallel=cp=2 comm=all_gather" --sharc-spmdize \
// RUN:   --sharc-autodiff --sharc-verify-placements \
// RUN:   | FileCheck %s --check-prefix=BALGATHER

// The contiguous split (split=contiguous): rank r holds block r.
// Ulysses: tokens and labels split along the sequence, parameters R; rope
// rotates by global positions; q, k, v go from a sequence split to a heads
// split by all_to_all, whole-sequence attention runs on 4 of the 8 heads,
// and the output comes back to the sequence split before the o projection.
// A2A-LABEL: module attributes {sharc.context_parallel = "a2a", sharc.mesh = #sharc.mesh<dp = 1, cp = 2, tp = 1>
// A2A: func.func @train_step
// A2A-SAME: tensor<4x2xi32, #sharc.place<cp = S(0)>> {sharc.input = "tokens"
// A2A-SAME: tensor<4x2xi32, #sharc.place<cp = S(0)>> {sharc.input = "labels"
// A2A-SAME: tensor<16xf32, #sharc.place<cp = R>> {sharc.param = "norm"
// A2A: %[[Q:.*]] = sharc.rope {{.*}}position_axis = "cp"{{.*}} -> tensor<4x2x16xf32, #sharc.place<cp = S(0)>>
// A2A-NEXT: %[[K:.*]] = sharc.rope {{.*}}position_axis = "cp"{{.*}} -> tensor<4x2x8xf32, #sharc.place<cp = S(0)>>
// A2A-NEXT: %[[QH:.*]] = sharc.all_to_all %[[Q]] {axis = "cp", concat_dim = 0 : i64, split_dim = 2 : i64} {{.*}} -> tensor<8x2x8xf32, #sharc.place<cp = S(2)>>
// A2A-NEXT: %[[KH:.*]] = sharc.all_to_all %[[K]] {axis = "cp", concat_dim = 0 : i64, split_dim = 2 : i64} {{.*}} -> tensor<8x2x4xf32, #sharc.place<cp = S(2)>>
// A2A-NEXT: %[[VH:.*]] = sharc.all_to_all %{{.*}} {axis = "cp", concat_dim = 0 : i64, split_dim = 2 : i64} {{.*}} -> tensor<8x2x4xf32, #sharc.place<cp = S(2)>>
// A2A-NEXT: %[[O:.*]], %{{.*}} = sharc.attention %[[QH]], %[[KH]], %[[VH]] {head_dim = 2 : i64} {{.*}} -> (tensor<8x2x8xf32, #sharc.place<cp = S(2)>>, tensor<2x4x8xf32, #sharc.place<cp = S(1)>>)
// A2A-NEXT: %[[OS:.*]] = sharc.all_to_all %[[O]] {axis = "cp", concat_dim = 2 : i64, split_dim = 0 : i64} {{.*}} -> tensor<4x2x16xf32, #sharc.place<cp = S(0)>>
// A2A-NEXT: sharc.matmul %[[OS]]
// A2A: %[[COUNT:.*]] = sharc.valid_count
// A2A-NEXT: sharc.all_reduce %[[COUNT]] {axis = "cp"}
// Backward: each exchange's transpose is the inverse exchange, and every
// parameter's gradient is summed over cp.
// A2A: sharc.all_to_all %{{.*}} {axis = "cp", concat_dim = 0 : i64, split_dim = 2 : i64} : (tensor<4x2x16xf32, #sharc.place<cp = S(0)>>)
// A2A-NEXT: sharc.attention_grad
// A2A-COUNT-3: sharc.all_to_all %{{.*}} {axis = "cp", concat_dim = 2 : i64, split_dim = 0 : i64}
// A2A: sharc.rope_grad {{.*}}position_axis = "cp"
// A2A: sharc.all_reduce {{.*}} {axis = "cp"} {{.*}} -> tensor<16x16xf32, #sharc.place<cp = R>>
// A2A-NOT: sharc.all_gather

// K/V all-gather: q stays this rank's block; k and v are gathered to R and
// attention offsets the block by its rank's position. In the backward the
// gathers' transposes reduce-scatter dk and dv.
// GATHER-LABEL: module attributes {sharc.context_parallel = "all_gather"
// GATHER: %[[Q:.*]] = sharc.rope {{.*}}position_axis = "cp"
// GATHER-NEXT: %[[K:.*]] = sharc.rope {{.*}}position_axis = "cp"
// GATHER-NEXT: %[[KG:.*]] = sharc.all_gather %[[K]] {axis = "cp", dim = 0 : i64} {{.*}} -> tensor<8x2x8xf32, #sharc.place<cp = R>>
// GATHER-NEXT: %[[VG:.*]] = sharc.all_gather %{{.*}} {axis = "cp", dim = 0 : i64} {{.*}} -> tensor<8x2x8xf32, #sharc.place<cp = R>>
// GATHER-NEXT: sharc.attention %[[Q]], %[[KG]], %[[VG]] {head_dim = 2 : i64, position_axis = "cp"} {{.*}} -> (tensor<4x2x16xf32, #sharc.place<cp = S(0)>>, tensor<2x8x4xf32, #sharc.place<cp = S(2)>>)
// GATHER-NOT: sharc.all_to_all
// GATHER: %{{.*}}, %[[DK:.*]], %[[DV:.*]] = sharc.attention_grad {{.*}}position_axis = "cp"
// GATHER-NEXT: sharc.reduce_scatter %[[DV]] {axis = "cp", dim = 0 : i64} {{.*}} -> tensor<4x2x8xf32, #sharc.place<cp = S(0)>>
// GATHER-NEXT: sharc.reduce_scatter %[[DK]] {axis = "cp", dim = 0 : i64} {{.*}} -> tensor<4x2x8xf32, #sharc.place<cp = S(0)>>
// GATHER-NEXT: sharc.rope_grad {{.*}}position_axis = "cp"

// tp x cp under sp: the sequence is split over cp, then tp (cp outer).
// For Ulysses both axes split the heads, tp outside cp (the stated order
// [tp, cp], against the mesh's nesting): q, k and v arrive with their
// heads split by tp, so each is exchanged by one all_to_all over cp
// within its tp group, and the output comes back the same way; nothing is
// gathered over tp around attention.
// TPCP: sharc.embedding {{.*}} -> tensor<4x2x16xf32, #sharc.place<cp = S(0)>>
// TPCP-NEXT: sharc.slice_to_rank {{.*}} -> tensor<2x2x16xf32, #sharc.place<cp = S(0), tp = S(0)>>
// TPCP: %[[Q:.*]] = sharc.rope {{.*}}position_axis = "cp"{{.*}} -> tensor<4x2x8xf32, #sharc.place<cp = S(0), tp = S(2)>>
// TPCP-NOT: sharc.all_gather
// TPCP: %[[QX:.*]] = sharc.all_to_all %[[Q]] {axis = "cp", concat_dim = 0 : i64, split_dim = 2 : i64} {{.*}} -> tensor<8x2x4xf32, #sharc.place<cp = S(2), tp = S(2), order = [tp, cp]>>
// TPCP-NEXT: %[[KX:.*]] = sharc.all_to_all %{{.*}} {axis = "cp", concat_dim = 0 : i64, split_dim = 2 : i64} {{.*}} -> tensor<8x2x2xf32, #sharc.place<cp = S(2), tp = S(2), order = [tp, cp]>>
// TPCP-NEXT: %[[VX:.*]] = sharc.all_to_all %{{.*}} {axis = "cp", concat_dim = 0 : i64, split_dim = 2 : i64} {{.*}} -> tensor<8x2x2xf32, #sharc.place<cp = S(2), tp = S(2), order = [tp, cp]>>
// TPCP-NEXT: %[[O:.*]], %{{.*}} = sharc.attention %[[QX]], %[[KX]], %[[VX]] {{.*}} -> (tensor<8x2x4xf32, #sharc.place<cp = S(2), tp = S(2), order = [tp, cp]>>, tensor<2x2x8xf32, #sharc.place<cp = S(1), tp = S(1), order = [tp, cp]>>)
// TPCP-NEXT: %[[OS:.*]] = sharc.all_to_all %[[O]] {axis = "cp", concat_dim = 2 : i64, split_dim = 0 : i64} {{.*}} -> tensor<4x2x8xf32, #sharc.place<cp = S(0), tp = S(2)>>
// TPCP-NEXT: sharc.matmul %[[OS]], {{.*}} -> tensor<4x2x16xf32, #sharc.place<cp = S(0), tp = P>>
// TPCP-NEXT: sharc.reduce_scatter {{.*}} {axis = "tp", dim = 0 : i64} {{.*}} -> tensor<2x2x16xf32, #sharc.place<cp = S(0), tp = S(0)>>

// dp x cp: the batch over dp, the sequence over cp; the valid-label count
// and every parameter's gradient are summed over both axes at once, the
// gradients in one bucket (all 8 fit in 25 MiB).
// DPCP: sharc.embedding {{.*}} -> tensor<4x1x16xf32, #sharc.place<cp = S(0), dp = S(1)>>
// DPCP: sharc.valid_count
// DPCP-NEXT: sharc.all_reduce {{.*}} {axis = "dp,cp"}
// DPCP: sharc.all_reduce_coalesced {{.*}} {axis = "dp,cp"} {{.*}} -> (tensor<16x16xf32, #sharc.place<cp = R, dp = R>>
// DPCP-NOT: sharc.all_reduce_coalesced
// DPCP-NOT: sharc.all_reduce {{.*}} -> tensor<16x16xf32

// The whole tp x cp step: four exchanges forward (q, k, v, out) and their
// four inverses backward, all over cp; tp gathers and scatters only the
// sequence (sp), never the heads (dimension 2).
// TPCPSTEP-LABEL: func.func @train_step
// TPCPSTEP-NOT: {{all_gather|reduce_scatter|slice_to_rank}} {{.*}}axis = "tp", dim = 2
// TPCPSTEP-COUNT-8: sharc.all_to_all {{.*}}axis = "cp"
// TPCPSTEP-NOT: sharc.all_to_all
// TPCPSTEP-NOT: {{all_gather|reduce_scatter|slice_to_rank}} {{.*}}axis = "tp", dim = 2

// The balanced split (the default): rank r holds chunks r and 3 - r of 4,
// recorded on the module for rope's and attention's positions. Ulysses's
// exchange gathers the sequence in rank order (chunks 0, 3, 1, 2): q, k
// and v are put in natural order, attention runs square and causal, and
// the output goes back to rank order before the inverse exchange; the
// backward permutes by the inverse orders.
// BALA2A-LABEL: module attributes {sharc.balanced_axis = "cp", sharc.context_parallel = "a2a"
// BALA2A: sharc.rope {{.*}}position_axis = "cp"{{.*}}position_split = "balanced"
// BALA2A: %[[QH:.*]] = sharc.all_to_all
// BALA2A-NEXT: %[[KH:.*]] = sharc.all_to_all
// BALA2A-NEXT: %[[VH:.*]] = sharc.all_to_all
// BALA2A-NEXT: %[[QN:.*]] = sharc.permute_blocks %[[QH]] {order = array<i64: 0, 2, 3, 1>} {{.*}} -> tensor<8x2x8xf32, #sharc.place<cp = S(2)>>
// BALA2A-NEXT: %[[KN:.*]] = sharc.permute_blocks %[[KH]] {order = array<i64: 0, 2, 3, 1>}
// BALA2A-NEXT: %[[VN:.*]] = sharc.permute_blocks %[[VH]] {order = array<i64: 0, 2, 3, 1>}
// BALA2A-NEXT: %[[O:.*]], %{{.*}} = sharc.attention %[[QN]], %[[KN]], %[[VN]] {head_dim = 2 : i64} :
// BALA2A-NEXT: %[[OR:.*]] = sharc.permute_blocks %[[O]] {order = array<i64: 0, 3, 1, 2>}
// BALA2A-NEXT: sharc.all_to_all %[[OR]] {axis = "cp", concat_dim = 2 : i64, split_dim = 0 : i64}
// BALA2A: sharc.permute_blocks {{.*}}order = array<i64: 0, 2, 3, 1>
// BALA2A-NEXT: sharc.attention_grad
// BALA2A-COUNT-3: sharc.permute_blocks {{.*}}order = array<i64: 0, 3, 1, 2>
// BALA2A: sharc.rope_grad {{.*}}position_axis = "cp"{{.*}}position_split = "balanced"

// The K/V all-gather under the balanced split: q keeps the rank's two
// chunks (attention's position_split), the gathered k and v are put in
// natural order, and their gradients back in rank order before the
// reduce_scatter.
// BALGATHER-LABEL: module attributes {sharc.balanced_axis = "cp", sharc.context_parallel = "all_gather"
// BALGATHER: %[[Q:.*]] = sharc.rope {{.*}}position_axis = "cp"{{.*}}position_split = "balanced"
// BALGATHER: %[[KG:.*]] = sharc.all_gather
// BALGATHER-NEXT: %[[VG:.*]] = sharc.all_gather
// BALGATHER-NEXT: %[[KN:.*]] = sharc.permute_blocks %[[KG]] {order = array<i64: 0, 2, 3, 1>} {{.*}} -> tensor<8x2x8xf32, #sharc.place<cp = R>>
// BALGATHER-NEXT: %[[VN:.*]] = sharc.permute_blocks %[[VG]] {order = array<i64: 0, 2, 3, 1>}
// BALGATHER-NEXT: sharc.attention %[[Q]], %[[KN]], %[[VN]] {head_dim = 2 : i64, position_axis = "cp", position_split = "balanced"}
// BALGATHER-NOT: sharc.all_to_all
// BALGATHER: sharc.attention_grad {{.*}}position_axis = "cp", position_split = "balanced"
// BALGATHER: %[[DR:.*]] = sharc.permute_blocks {{.*}}order = array<i64: 0, 3, 1, 2>{{.*}} -> tensor<8x2x8xf32, #sharc.place<cp = P>>
// BALGATHER: sharc.reduce_scatter %[[DR]] {axis = "cp", dim = 0 : i64}
