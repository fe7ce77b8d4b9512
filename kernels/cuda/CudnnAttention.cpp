//===- CudnnAttention.cpp - causal GQA attention on cuDNN's SDPA ----------===//
//
// One cuDNN frontend graph per (direction, shape, query run): the sdpa node
// forward (generating Stats, the log-sum-exp) and the sdpa_backward node,
// both with the causal mask aligned top-left (key j <= query i) on a square
// call, bottom-right on a query block against a longer key prefix, or none
// where every query of the run sees all its keys (ring attention's earlier
// blocks), and scale 1/sqrt(head_dim), bf16 in and out with fp32 softmax
// and accumulation.
//
//===----------------------------------------------------------------------===//

#include "kernels/cuda/CudnnAttention.h"

#include "kernels/AttentionRuns.h"
#include "kernels/cuda/AttentionRows.h"
#include "kernels/cuda/Launch.h"

#include <cudnn.h>
#include <cudnn_frontend.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <vector>

namespace sharc::kernels::cuda {

namespace fe = cudnn_frontend;

namespace {

// The uids of the graphs' user tensors (the variant pack's keys).
enum Uid : int64_t {
  kQ = 1,
  kK,
  kV,
  kO,
  kStats,
  kDO,
  kDQ,
  kDK,
  kDV,
  kSeqLenQ,
  kSeqLenKv
};

Status cudnnStatus(cudnnStatus_t status, const char *call) {
  if (status == CUDNN_STATUS_SUCCESS)
    return Status::ok();
  return Status::runtimeError(std::string("cuDNN: ") + call + ": " +
                              cudnnGetErrorString(status));
}

Status frontendStatus(fe::error_t error, const char *step) {
  if (error.is_good())
    return Status::ok();
  return Status::runtimeError(std::string("cuDNN attention: ") + step + ": " +
                              error.get_message());
}

/// Sizes of one SDPA call: `rows` queries against the first `keys` keys,
/// its queries from some row of a [totalRows, B, heads*D] q (the lse's
/// rows are totalRows apart).
struct Shape {
  int64_t rows, keys, totalRows, batch, numHeads, numKvHeads, headDim;
};

/// Strides of a [S, B, heads*D] activation whose [s, b] rows are `pitch`
/// elements apart (0: packed), as cuDNN's [b, h, s, d].
std::vector<int64_t> headStrides(const Shape &s, int64_t heads, int64_t pitch) {
  int64_t row = pitch > 0 ? pitch : heads * s.headDim;
  return {row, s.headDim, s.batch * row, 1};
}

/// `length` rows of a [S, B, heads*D] activation seen as cuDNN's
/// [b, h, s, d].
std::shared_ptr<fe::graph::Tensor_attributes>
headTensor(fe::graph::Graph &graph, const char *name, int64_t uid,
           const Shape &s, int64_t heads, int64_t length, int64_t pitch = 0) {
  return graph.tensor(fe::graph::Tensor_attributes()
                          .set_name(name)
                          .set_uid(uid)
                          .set_dim({s.batch, heads, length, s.headDim})
                          .set_stride(headStrides(s, heads, pitch)));
}

void setHeadOutput(fe::graph::Tensor_attributes &tensor, int64_t uid,
                   const Shape &s, int64_t heads, int64_t length,
                   int64_t pitch = 0) {
  tensor.set_output(true)
      .set_uid(uid)
      .set_dim({s.batch, heads, length, s.headDim})
      .set_stride(headStrides(s, heads, pitch));
}

/// The run's rows of the [B, H, totalRows] fp32 log-sum-exp as cuDNN's
/// [b, h, s, 1] Stats.
std::vector<int64_t> statsDim(const Shape &s) {
  return {s.batch, s.numHeads, s.rows, 1};
}
std::vector<int64_t> statsStride(const Shape &s) {
  return {s.numHeads * s.totalRows, s.totalRows, 1, 1};
}

/// The dv pitch and the lse's row pitch run `i`'s graph is built with: a
/// forward's are the tensors'; a backward writes dv in place in its last
/// call only (the others to packed staging) and reads the lse packed where
/// the call's rows are not all of them (kernels/AttentionRuns.h).
std::pair<int64_t, int64_t> runLayout(const AttentionArgs &args,
                                      const std::vector<QueryRun> &, size_t) {
  return {0, args.seqLen};
}
std::pair<int64_t, int64_t> runLayout(const AttentionGradArgs &args,
                                      const std::vector<QueryRun> &runs,
                                      size_t i) {
  return {i == lastCall(runs) ? args.dvPitch : 0,
          runs[i].rows == args.seqLen ? args.seqLen : runs[i].rows};
}

/// runStaging for args.
RunStaging stagingOf(const AttentionGradArgs &args,
                     const std::vector<QueryRun> &runs) {
  return runStaging(runs, args.seqLen, args.batch, args.numHeads,
                    args.numKvHeads, args.headDim);
}

/// Row `row` of a bf16 [S, batch, width] activation (a run's first query).
char *rowAt(const void *data, int64_t row, int64_t batch, int64_t width) {
  return static_cast<char *>(const_cast<void *>(data)) +
         row * batch * width * 2;
}

} // namespace

struct CudnnAttention::Graph {
  fe::graph::Graph graph;
  int64_t workspaceBytes = 0;
};

Result<std::unique_ptr<CudnnAttention>>
CudnnAttention::create(DeviceStream stream, bool deterministic) {
  std::unique_ptr<CudnnAttention> engine(new CudnnAttention());
  cudnnHandle_t handle = nullptr;
  SHARC_TRY(cudnnStatus(cudnnCreate(&handle), "cudnnCreate"));
  engine->handle_ = handle;
  engine->deterministic_ = deterministic;
  engine->stream_ = stream;
  SHARC_TRY(cudnnStatus(cudnnSetStream(handle, stream), "cudnnSetStream"));
  return engine;
}

CudnnAttention::~CudnnAttention() {
  graphs_.clear(); // the plans refer to the handle
  if (handle_)
    cudnnDestroy(static_cast<cudnnHandle_t>(handle_));
}

bool CudnnAttention::accepts(DType dtype, int64_t headDim) {
  return dtype == DType::BF16 && headDim % 8 == 0 && headDim <= 128;
}

Status CudnnAttention::buildGraph(Graph &built) {
  fe::graph::Graph &graph = built.graph;
  auto handle = static_cast<cudnnHandle_t>(handle_);
  SHARC_TRY(frontendStatus(graph.validate(), "validate"));
  SHARC_TRY(frontendStatus(graph.build_operation_graph(handle),
                           "build_operation_graph"));
  SHARC_TRY(frontendStatus(graph.create_execution_plans({fe::HeurMode_t::A}),
                           "create_execution_plans"));
  SHARC_TRY(frontendStatus(graph.check_support(), "check_support"));
  SHARC_TRY(frontendStatus(graph.build_plans(), "build_plans"));
  return frontendStatus(graph.get_workspace_size(built.workspaceBytes),
                        "get_workspace_size");
}

template <typename Args>
Result<CudnnAttention::Graph *>
CudnnAttention::graphFor(const Args &args, const QueryRun &run, int64_t dvPitch,
                         int64_t lseRows) {
  constexpr bool backward = std::is_same_v<Args, AttentionGradArgs>;
  Key key{backward,     run.causal,  run.rows,      run.keys,
          lseRows,      args.batch,  args.numHeads, args.numKvHeads,
          args.headDim, args.vPitch, dvPitch};
  if (auto it = graphs_.find(key); it != graphs_.end())
    return it->second.get();
  Shape s{run.rows,      run.keys,        lseRows,     args.batch,
          args.numHeads, args.numKvHeads, args.headDim};
  bool square = s.rows == s.keys;
  auto built = std::make_unique<Graph>();
  fe::graph::Graph &graph = built->graph;
  graph.set_io_data_type(fe::DataType_t::BFLOAT16)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  auto q = headTensor(graph, "q", kQ, s, s.numHeads, s.rows);
  auto k = headTensor(graph, "k", kK, s, s.numKvHeads, s.keys);
  auto v = headTensor(graph, "v", kV, s, s.numKvHeads, s.keys, args.vPitch);
  float scale = 1.0f / std::sqrt(static_cast<float>(s.headDim));
  if (!backward) {
    auto options = fe::graph::SDPA_attributes()
                       .set_name("attention")
                       .set_generate_stats(true)
                       .set_attn_scale(scale);
    if (run.causal && square)
      options.set_causal_mask(true);
    else if (run.causal)
      options.set_causal_mask_bottom_right(true);
    auto [o, stats] = graph.sdpa(q, k, v, options);
    setHeadOutput(*o, kO, s, s.numHeads, s.rows);
    stats->set_output(true)
        .set_uid(kStats)
        .set_data_type(fe::DataType_t::FLOAT)
        .set_dim(statsDim(s))
        .set_stride(statsStride(s));
  } else {
    auto o = headTensor(graph, "o", kO, s, s.numHeads, s.rows);
    auto dO = headTensor(graph, "dO", kDO, s, s.numHeads, s.rows);
    auto stats = graph.tensor(fe::graph::Tensor_attributes()
                                  .set_name("stats")
                                  .set_uid(kStats)
                                  .set_data_type(fe::DataType_t::FLOAT)
                                  .set_dim(statsDim(s))
                                  .set_stride(statsStride(s)));
    auto options = fe::graph::SDPA_backward_attributes()
                       .set_name("attention_grad")
                       .set_attn_scale(scale)
                       .set_deterministic_algorithm(deterministic_);
    if (run.causal && square)
      options.set_causal_mask(true);
    else if (run.causal)
      options.set_causal_mask_bottom_right(true);
    auto [dQ, dK, dV] = graph.sdpa_backward(q, k, v, o, dO, stats, options);
    setHeadOutput(*dQ, kDQ, s, s.numHeads, s.rows);
    setHeadOutput(*dK, kDK, s, s.numKvHeads, s.keys);
    setHeadOutput(*dV, kDV, s, s.numKvHeads, s.keys, dvPitch);
  }
  SHARC_TRY(buildGraph(*built));
  Graph *result = built.get();
  graphs_.emplace(key, std::move(built));
  return result;
}

bool CudnnAttention::accepts(const DecodeAttentionArgs &args) {
  bool allBf16 = true;
  for (DType dtype : {args.q.dtype, args.k.dtype, args.v.dtype,
                      args.kCache.dtype, args.vCache.dtype, args.out.dtype})
    allBf16 = allBf16 && dtype == DType::BF16;
  return decodePrefillOnCudnn(args.rows, allBf16, args.headDim);
}

Result<CudnnAttention::Graph *>
CudnnAttention::prefillGraphFor(const DecodeAttentionArgs &args) {
  if (!accepts(args))
    return Status::invalidInput(
        "cuDNN's prefill takes steps of several rows, bf16 throughout, with "
        "head_dim a multiple of 8 up to 128");
  PrefillKey key{args.rows,       args.batch,   args.numHeads,
                 args.numKvHeads, args.headDim, args.cacheLen};
  if (auto it = prefillGraphs_.find(key); it != prefillGraphs_.end())
    return it->second.get();
  int64_t rows = args.rows, batch = args.batch, heads = args.numHeads;
  int64_t kvHeads = args.numKvHeads, dim = args.headDim;
  auto built = std::make_unique<Graph>();
  fe::graph::Graph &graph = built->graph;
  graph.set_io_data_type(fe::DataType_t::BFLOAT16)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  // Sequence-first [S, B, heads * D] rows as cuDNN's [b, h, s, d]: the
  // rotated queries and the output over the step's T rows, the caches
  // over all C positions (the padding mask stops each sample at its keys).
  auto rowsOf = [&](const char *name, int64_t uid, int64_t length,
                    int64_t width) {
    return graph.tensor(
        fe::graph::Tensor_attributes()
            .set_name(name)
            .set_uid(uid)
            .set_dim({batch, width, length, dim})
            .set_stride({width * dim, dim, batch * width * dim, 1}));
  };
  auto counts = [&](const char *name, int64_t uid) {
    return graph.tensor(fe::graph::Tensor_attributes()
                            .set_name(name)
                            .set_uid(uid)
                            .set_dim({batch, 1, 1, 1})
                            .set_stride({1, 1, 1, 1})
                            .set_data_type(fe::DataType_t::INT32));
  };
  auto q = rowsOf("q", kQ, rows, heads);
  auto k = rowsOf("k_cache", kK, args.cacheLen, kvHeads);
  auto v = rowsOf("v_cache", kV, args.cacheLen, kvHeads);
  auto options = fe::graph::SDPA_attributes()
                     .set_name("prefill")
                     .set_generate_stats(false)
                     .set_attn_scale(1.0f / std::sqrt(static_cast<float>(dim)))
                     .set_padding_mask(true)
                     .set_seq_len_q(counts("queries", kSeqLenQ))
                     .set_seq_len_kv(counts("keys", kSeqLenKv))
                     .set_causal_mask_bottom_right(true);
  auto [o, stats] = graph.sdpa(q, k, v, options);
  (void)stats;
  o->set_output(true)
      .set_uid(kO)
      .set_dim({batch, heads, rows, dim})
      .set_stride({heads * dim, dim, batch * heads * dim, 1});
  SHARC_TRY(buildGraph(*built));
  Graph *result = built.get();
  prefillGraphs_.emplace(key, std::move(built));
  return result;
}

Result<int64_t> CudnnAttention::prepare(const DecodeAttentionArgs &args) {
  auto graph = prefillGraphFor(args);
  if (!graph)
    return graph.status();
  return decodePrefillStagingBytes(args.rows, args.batch, args.numHeads,
                                   args.headDim, 2) +
         (*graph)->workspaceBytes;
}

Status CudnnAttention::run(const DecodeAttentionArgs &args, void *scratch) {
  auto graph = prefillGraphFor(args);
  if (!graph)
    return graph.status();
  SHARC_TRY(decodePrefillStage(args, scratch, stream_));
  auto *staging = static_cast<char *>(scratch);
  int64_t queryBytes = decodePrefillQueryBytes(args.rows, args.batch,
                                               args.numHeads, args.headDim, 2);
  auto *counts = reinterpret_cast<int32_t *>(staging + queryBytes);
  std::unordered_map<int64_t, void *> pack{
      {kQ, staging},          {kK, args.kCache.data},
      {kV, args.vCache.data}, {kO, args.out.data},
      {kSeqLenQ, counts},     {kSeqLenKv, counts + args.batch}};
  SHARC_TRY(execute(**graph, pack,
                    staging + decodePrefillStagingBytes(args.rows, args.batch,
                                                        args.numHeads,
                                                        args.headDim, 2),
                    "execute (prefill)"));
  return decodePrefillRepeat(args, scratch, stream_);
}

Status CudnnAttention::execute(Graph &graph,
                               std::unordered_map<int64_t, void *> &pack,
                               void *workspace, const char *direction) {
  return frontendStatus(
      graph.graph.execute(static_cast<cudnnHandle_t>(handle_), pack, workspace),
      direction);
}

template <typename Args>
Result<int64_t> CudnnAttention::prepareRuns(const Args &args) {
  if (!accepts(args.q.dtype, args.headDim))
    return Status::invalidInput("cuDNN attention takes bf16 with head_dim a "
                                "multiple of 8 up to 128");
  auto runs = queryRuns(args);
  if (!runs)
    return runs.status();
  int64_t bytes = 0;
  for (size_t i = 0; i < runs->size(); ++i) {
    if ((*runs)[i].keys == 0)
      continue;
    auto [dvPitch, lseRows] = runLayout(args, *runs, i);
    auto graph = graphFor(args, (*runs)[i], dvPitch, lseRows);
    if (!graph)
      return graph.status();
    bytes = std::max(bytes, (*graph)->workspaceBytes);
  }
  if constexpr (std::is_same_v<Args, AttentionGradArgs>)
    return stagingOf(args, *runs).library + bytes;
  return bytes;
}

Result<int64_t> CudnnAttention::prepare(const AttentionArgs &args) {
  return prepareRuns(args);
}

Result<int64_t> CudnnAttention::prepare(const AttentionGradArgs &args) {
  return prepareRuns(args);
}

Status CudnnAttention::run(const AttentionArgs &args, void *workspace) {
  auto runs = queryRuns(args);
  if (!runs)
    return runs.status();
  int64_t qWidth = args.numHeads * args.headDim;
  for (size_t i = 0; i < runs->size(); ++i) {
    const QueryRun &run = (*runs)[i];
    if (run.keys == 0) {
      // Rows that see no key of the block (ring attention).
      SHARC_CUDA(
          cudaMemsetAsync(rowAt(args.out.data, run.row, args.batch, qWidth), 0,
                          run.rows * args.batch * qWidth * 2,
                          static_cast<cudaStream_t>(stream_)));
      SHARC_TRY(fillFloatRows(args.lse + run.row, args.seqLen,
                              args.batch * args.numHeads, run.rows,
                              kEmptyRowLse, stream_));
      continue;
    }
    auto [dvPitch, lseRows] = runLayout(args, *runs, i);
    auto graph = graphFor(args, run, dvPitch, lseRows);
    if (!graph)
      return graph.status();
    std::unordered_map<int64_t, void *> pack{
        {kQ, rowAt(args.q.data, run.row, args.batch, qWidth)},
        {kK, const_cast<void *>(args.k.data)},
        {kV, const_cast<void *>(args.v.data)},
        {kO, rowAt(args.out.data, run.row, args.batch, qWidth)},
        {kStats, args.lse + run.row}};
    SHARC_TRY(execute(**graph, pack, workspace, "execute (forward)"));
  }
  return Status::ok();
}

Status CudnnAttention::run(const AttentionGradArgs &args, void *workspace) {
  auto runs = queryRuns(args);
  if (!runs)
    return runs.status();
  int64_t qWidth = args.numHeads * args.headDim;
  int64_t kvWidth = args.numKvHeads * args.headDim;
  int64_t dvPitch = args.dvPitch > 0 ? args.dvPitch : kvWidth;
  RunStaging staging = stagingOf(args, *runs);
  char *stagedK = static_cast<char *>(workspace);
  char *stagedV = stagedK + staging.dv;
  auto *stats = reinterpret_cast<float *>(stagedK + staging.stats);
  char *library = stagedK + staging.library;
  auto stream = static_cast<cudaStream_t>(stream_);
  size_t lastRun = lastCall(*runs);
  for (size_t i = runs->size(); i-- > 0;) {
    const QueryRun &run = (*runs)[i];
    if (run.keys == 0) {
      SHARC_CUDA(
          cudaMemsetAsync(rowAt(args.dq.data, run.row, args.batch, qWidth), 0,
                          run.rows * args.batch * qWidth * 2, stream));
      continue;
    }
    bool last = i == lastRun;
    auto [graphDvPitch, lseRows] = runLayout(args, *runs, i);
    auto graph = graphFor(args, run, graphDvPitch, lseRows);
    if (!graph)
      return graph.status();
    float *lse = const_cast<float *>(args.lse) + run.row;
    if (lseRows != args.seqLen) {
      SHARC_CUDA(cudaMemcpy2DAsync(stats, run.rows * 4, lse, args.seqLen * 4,
                                   run.rows * 4, args.batch * args.numHeads,
                                   cudaMemcpyDeviceToDevice, stream));
      lse = stats;
    }
    std::unordered_map<int64_t, void *> pack{
        {kQ, rowAt(args.q.data, run.row, args.batch, qWidth)},
        {kK, const_cast<void *>(args.k.data)},
        {kV, const_cast<void *>(args.v.data)},
        {kO, rowAt(args.out.data, run.row, args.batch, qWidth)},
        {kDO, rowAt(args.dout.data, run.row, args.batch, qWidth)},
        {kStats, lse},
        {kDQ, rowAt(args.dq.data, run.row, args.batch, qWidth)},
        {kDK, last ? args.dk.data : stagedK},
        {kDV, last ? args.dv.data : stagedV}};
    SHARC_TRY(execute(**graph, pack, library, "execute (backward)"));
    if (last) {
      // Keys past the longest prefix are seen by no query of this rank.
      int64_t seen = run.keys * args.batch, unseen = args.keys() * args.batch;
      if (seen < unseen) {
        SHARC_CUDA(
            cudaMemsetAsync(rowAt(args.dk.data, run.keys, args.batch, kvWidth),
                            0, (unseen - seen) * kvWidth * 2, stream));
        SHARC_CUDA(cudaMemset2DAsync(
            static_cast<char *>(args.dv.data) + seen * dvPitch * 2, dvPitch * 2,
            0, kvWidth * 2, unseen - seen, stream));
      }
      continue;
    }
    SHARC_TRY(addBf16Rows(args.dk.data, kvWidth, stagedK, run.keys * args.batch,
                          kvWidth, stream_));
    SHARC_TRY(addBf16Rows(args.dv.data, dvPitch, stagedV, run.keys * args.batch,
                          kvWidth, stream_));
  }
  if (lastRun == runs->size()) { // no query sees a key of the block
    int64_t keyRows = args.keys() * args.batch;
    SHARC_CUDA(cudaMemsetAsync(args.dk.data, 0, keyRows * kvWidth * 2, stream));
    SHARC_CUDA(cudaMemset2DAsync(args.dv.data, dvPitch * 2, 0, kvWidth * 2,
                                 keyRows, stream));
  }
  return Status::ok();
}

} // namespace sharc::kernels::cuda
