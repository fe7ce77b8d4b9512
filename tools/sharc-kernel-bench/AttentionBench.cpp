//===- AttentionBench.cpp - attention TFLOP/s, sharc's kernel and cuDNN ---===//
//
// sharc-attention-bench: times the causal GQA attention forward and backward
// at the benchmark's shapes with CUDA events, for sharc's own kernels
// (kernels/cuda/Attention.cu) and, where built with it, cuDNN's SDPA in both
// backward algorithms. Inputs are random bf16 (never zeros); each timing is
// the mean of --iters launches after --warmup. tests/gpu/attention-peer.py
// measures PyTorch's scaled_dot_product_attention on the same shapes.
//
//   sharc-attention-bench [--warmup N] [--iters N] [--shape S,B,H,KV,D]...
//                         [--cp N[,contiguous] | --ring N[,contiguous]]
//
// Each --shape (sequence, batch, query heads, KV heads, head dim) replaces
// the default list of the benchmark's shapes. --cp N times, for each of N
// ranks, context parallelism's K/V all-gather attention: the rank's S/N
// query rows (balanced split, or contiguous) against all S keys. --ring N
// times ring attention's blocks: for each rank, its S/N query rows against
// each step's S/N keys (the blocks no query sees are not launched), and
// each rank's sum over the ring's steps.
//
// FLOPs: the forward's two products over the (query, key) pairs the causal
// mask keeps, 2 * 2 * B * H * pairs * D with pairs about S^2 / 2 unsplit;
// the backward 2.5x the forward (five products, the scores recomputed), the
// convention FlashAttention's papers use.
//
//===----------------------------------------------------------------------===//

#include "kernels/Attention.h"
#include "kernels/AttentionRuns.h"
#include "kernels/SequencePositions.h"
#include "kernels/cuda/Launch.h"
#if SHARC_WITH_CUDNN
#include "kernels/cuda/CudnnAttention.h"
#endif

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <vector>

using namespace sharc;
using namespace sharc::kernels;

namespace {

struct Shape {
  int64_t seqLen, batch, numHeads, numKvHeads, headDim;
};

void check(const Status &status, const char *what) {
  if (status.isOk())
    return;
  std::fprintf(stderr, "sharc-attention-bench: %s: %s\n", what,
               status.message().c_str());
  std::exit(1);
}

void checkCuda(cudaError_t error, const char *what) {
  check(cuda::cudaStatus(error, what), what);
}

/// `numel` random bf16 values of magnitude about `scale`, on the device.
void *randomDevice(int64_t numel, float scale, std::mt19937 &rng) {
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<uint16_t> host(static_cast<size_t>(numel));
  for (uint16_t &value : host)
    value = floatToBf16(normal(rng));
  void *data = nullptr;
  checkCuda(cudaMalloc(&data, host.size() * 2), "cudaMalloc");
  checkCuda(
      cudaMemcpy(data, host.data(), host.size() * 2, cudaMemcpyHostToDevice),
      "cudaMemcpy");
  return data;
}

/// Mean milliseconds of `launch` over `iters` runs after `warmup`.
double timeMs(const std::function<Status()> &launch, int warmup, int iters) {
  for (int i = 0; i < warmup; ++i)
    check(launch(), "warm-up launch");
  cudaEvent_t start, stop;
  checkCuda(cudaEventCreate(&start), "cudaEventCreate");
  checkCuda(cudaEventCreate(&stop), "cudaEventCreate");
  checkCuda(cudaEventRecord(start), "cudaEventRecord");
  for (int i = 0; i < iters; ++i)
    check(launch(), "timed launch");
  checkCuda(cudaEventRecord(stop), "cudaEventRecord");
  checkCuda(cudaEventSynchronize(stop), "cudaEventSynchronize");
  float ms = 0;
  checkCuda(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return ms / iters;
}

struct Buffers {
  void *q, *k, *v, *out, *dout, *dq, *dk, *dv;
  float *lse;
};

/// One rank's query block: `rows` queries at `queries` against all of the
/// shape's keys (rows == seqLen: the whole sequence, unsplit), or against
/// ring attention's block of `keyRows` keys at `keys`.
struct Block {
  int64_t rows;
  RowPositions queries;
  std::string name;
  int64_t keyRows = 0; ///< 0: all of the shape's keys, from position 0
  RowPositions keys = {};
  int64_t kvRows(const Shape &s) const {
    return keyRows > 0 ? keyRows : s.seqLen;
  }
};

Buffers allocate(const Shape &s, const Block &block, std::mt19937 &rng) {
  int64_t qNumel = block.rows * s.batch * s.numHeads * s.headDim;
  int64_t kvNumel = block.kvRows(s) * s.batch * s.numKvHeads * s.headDim;
  Buffers b{};
  b.q = randomDevice(qNumel, 1.0f, rng);
  b.k = randomDevice(kvNumel, 1.0f, rng);
  b.v = randomDevice(kvNumel, 1.0f, rng);
  b.out = randomDevice(qNumel, 1.0f, rng);
  b.dout = randomDevice(qNumel, 1.0f, rng);
  b.dq = randomDevice(qNumel, 1.0f, rng);
  b.dk = randomDevice(kvNumel, 1.0f, rng);
  b.dv = randomDevice(kvNumel, 1.0f, rng);
  checkCuda(cudaMalloc(reinterpret_cast<void **>(&b.lse),
                       s.batch * s.numHeads * block.rows * sizeof(float)),
            "cudaMalloc");
  return b;
}

void release(Buffers &b) {
  for (void *p : {b.q, b.k, b.v, b.out, b.dout, b.dq, b.dk, b.dv,
                  static_cast<void *>(b.lse)})
    cudaFree(p);
}

AttentionExtent extentOf(const Shape &s, const Block &block) {
  return {.seqLen = block.rows,
          .batch = s.batch,
          .numHeads = s.numHeads,
          .numKvHeads = s.numKvHeads,
          .headDim = s.headDim,
          .kvSeqLen = block.kvRows(s),
          .queries = block.queries,
          .keys = block.keys};
}

AttentionArgs forwardArgs(const Shape &s, const Block &block,
                          const Buffers &b) {
  DType bf16 = DType::BF16;
  return withExtent(AttentionArgs{.q = {b.q, bf16},
                                  .k = {b.k, bf16},
                                  .v = {b.v, bf16},
                                  .out = {b.out, bf16},
                                  .lse = b.lse},
                    extentOf(s, block));
}

AttentionGradArgs backwardArgs(const Shape &s, const Block &block,
                               const Buffers &b) {
  DType bf16 = DType::BF16;
  return withExtent(AttentionGradArgs{.q = {b.q, bf16},
                                      .k = {b.k, bf16},
                                      .v = {b.v, bf16},
                                      .out = {b.out, bf16},
                                      .dout = {b.dout, bf16},
                                      .lse = b.lse,
                                      .dq = {b.dq, bf16},
                                      .dk = {b.dk, bf16},
                                      .dv = {b.dv, bf16}},
                    extentOf(s, block));
}

/// The (query, key) pairs the causal mask keeps for `block`'s queries.
double causalPairs(const Shape &s, const Block &block) {
  double pairs = 0;
  for (const QueryRun &run :
       queryRuns(block.queries, block.rows, block.keys, block.kvRows(s)))
    pairs += double(run.rows) * run.keys -
             (run.causal ? double(run.rows) * (run.rows - 1) / 2 : 0.0);
  return pairs;
}

void report(const Shape &s, const Block &block, const char *impl, double fwdMs,
            double bwdMs) {
  // 4 B H D per kept pair (unsplit, about 2 B H S^2 D).
  double fwdFlops =
      4.0 * s.batch * s.numHeads * causalPairs(s, block) * s.headDim;
  double fwd = fwdFlops / (fwdMs * 1e9),
         both = 3.5 * fwdFlops / ((fwdMs + bwdMs) * 1e9);
  std::printf("S=%-5lld B=%lld H=%lld/%lld D=%-3lld %s%-22s fwd %7.3f ms "
              "%6.1f TFLOP/s  bwd %7.3f ms  fwd+bwd %6.1f TFLOP/s\n",
              (long long)s.seqLen, (long long)s.batch, (long long)s.numHeads,
              (long long)s.numKvHeads, (long long)s.headDim, block.name.c_str(),
              impl, fwdMs, fwd, bwdMs, both);
}

/// The query blocks of `ranks` ranks (1: the whole sequence).
std::vector<Block> blocksOf(const Shape &s, int64_t ranks,
                            SequenceSplit split) {
  if (ranks <= 1)
    return {{s.seqLen, RowPositions{}, ""}};
  std::vector<Block> blocks;
  int64_t rows = s.seqLen / ranks;
  for (int64_t r = 0; r < ranks; ++r)
    blocks.push_back(
        {rows, rowPositions(split, r, ranks, rows),
         "rank " + std::to_string(r) + "/" + std::to_string(ranks) + " "});
  return blocks;
}

/// Ring attention's blocks of `ranks` ranks: each rank's queries against
/// the key block of each step, where some query sees a key.
std::vector<Block> ringBlocksOf(const Shape &s, int64_t ranks,
                                SequenceSplit split) {
  std::vector<Block> blocks;
  int64_t rows = s.seqLen / ranks;
  for (int64_t r = 0; r < ranks; ++r)
    for (int64_t step = 0; step < ranks; ++step) {
      std::optional<int64_t> keyBlock = ringKeyBlock(split, r, ranks, step);
      if (!keyBlock)
        continue;
      RowPositions queries = rowPositions(split, r, ranks, rows);
      RowPositions keys = rowPositions(split, *keyBlock, ranks, rows);
      if (keys.at(0) > queries.at(rows - 1))
        continue;
      blocks.push_back({rows, queries,
                        "rank " + std::to_string(r) + "/" +
                            std::to_string(ranks) + " step " +
                            std::to_string(step) + " ",
                        rows, keys});
    }
  return blocks;
}

/// fwd + bwd ms of sharc's kernel and of cuDNN (0 where not built).
struct Timed {
  double sharc = 0, cudnn = 0;
};

/// Times sharc's kernel and cuDNN's (both backward algorithms) on one
/// block of `s`.
Timed measure(const Shape &s, const Block &block, int warmup, int iters,
              std::mt19937 &rng) {
  Timed timed;
  Buffers b = allocate(s, block, rng);
  AttentionArgs fwd = forwardArgs(s, block, b);
  AttentionGradArgs bwd = backwardArgs(s, block, b);
  // Every backward reads the lse its own implementation's forward wrote.
  double ms =
      timeMs([&] { return cuda::attention(fwd, nullptr); }, warmup, iters);
  double bwdMs =
      timeMs([&] { return cuda::attentionGrad(bwd, nullptr); }, warmup, iters);
  report(s, block, "sharc (mma.sync)", ms, bwdMs);
  timed.sharc = ms + bwdMs;
#if SHARC_WITH_CUDNN
  for (bool deterministic : {false, true}) {
    auto engine = cuda::CudnnAttention::create(nullptr, deterministic);
    check(engine.status(), "cuDNN handle");
    auto fwdBytes = (*engine)->prepare(fwd);
    check(fwdBytes.status(), "cuDNN forward graph");
    auto bwdBytes = (*engine)->prepare(bwd);
    check(bwdBytes.status(), "cuDNN backward graph");
    void *workspace = nullptr;
    checkCuda(cudaMalloc(&workspace,
                         std::max<int64_t>(1, std::max(*fwdBytes, *bwdBytes))),
              "cudaMalloc");
    double cudnnFwd =
        timeMs([&] { return (*engine)->run(fwd, workspace); }, warmup, iters);
    double cudnnBwd =
        timeMs([&] { return (*engine)->run(bwd, workspace); }, warmup, iters);
    report(s, block, deterministic ? "cuDNN (deterministic)" : "cuDNN",
           cudnnFwd, cudnnBwd);
    if (!deterministic)
      timed.cudnn = cudnnFwd + cudnnBwd;
    // Beside the compiler's estimate (kernels/AttentionRuns.h).
    int64_t estimate = 0;
    if (auto runs = kernels::queryRuns(bwd))
      estimate = kernels::cudnnAttentionGradRunBytes(
          *runs, block.rows, s.batch, s.numHeads, s.numKvHeads, s.headDim);
    std::printf("    cuDNN workspace: forward %lld, backward %lld bytes "
                "(sharc's estimate %lld)\n",
                (long long)*fwdBytes, (long long)*bwdBytes,
                (long long)estimate);
    cudaFree(workspace);
  }
#endif
  release(b);
  return timed;
}

/// "S,B,H,KV,D" as a Shape, or exits naming the flag.
Shape parseShape(const std::string &text) {
  long long seq = 0, batch = 0, heads = 0, kvHeads = 0, dim = 0;
  if (std::sscanf(text.c_str(), "%lld,%lld,%lld,%lld,%lld", &seq, &batch,
                  &heads, &kvHeads, &dim) != 5 ||
      seq <= 0 || batch <= 0 || kvHeads <= 0 || heads % kvHeads != 0 ||
      dim <= 0) {
    std::fprintf(stderr,
                 "sharc-attention-bench: --shape %s: expected S,B,H,KV,D "
                 "with KV dividing H\n",
                 text.c_str());
    std::exit(2);
  }
  return {seq, batch, heads, kvHeads, dim};
}

} // namespace

int main(int argc, char **argv) {
  int warmup = 5, iters = 20;
  // MiniMind's shapes (heads 8/4, dim 96) at the throughput points' global
  // batch 4 on one GPU, and the compute-bound point's (32/8, dim 128).
  std::vector<Shape> shapes = {{2048, 4, 8, 4, 96},
                               {8192, 1, 8, 4, 96},
                               {4096, 4, 32, 8, 128},
                               {4096, 4, 16, 4, 128}};
  bool shapesGiven = false;
  int64_t ranks = 1;
  bool ring = false;
  SequenceSplit split = SequenceSplit::Balanced;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--warmup")
      warmup = std::atoi(argv[i + 1]);
    else if (flag == "--iters")
      iters = std::atoi(argv[i + 1]);
    else if (flag == "--shape") {
      if (!shapesGiven)
        shapes.clear();
      shapesGiven = true;
      shapes.push_back(parseShape(argv[i + 1]));
    } else if (flag == "--cp" || flag == "--ring") {
      ring = flag == "--ring";
      long long n = 0;
      char how[16] = "";
      int fields = std::sscanf(argv[i + 1], "%lld,%15s", &n, how);
      std::string howText = how;
      if (fields < 1 || n < 1 ||
          (fields == 2 && howText != "contiguous" && howText != "balanced")) {
        std::fprintf(stderr,
                     "sharc-attention-bench: %s %s: expected N, "
                     "N,contiguous or N,balanced\n",
                     flag.c_str(), argv[i + 1]);
        return 2;
      }
      ranks = n;
      if (howText == "contiguous")
        split = SequenceSplit::Contiguous;
    } else {
      std::fprintf(stderr,
                   "sharc-attention-bench: unknown flag %s (expected "
                   "--warmup, --iters, --shape, --cp or --ring)\n",
                   flag.c_str());
      return 2;
    }
  }
  if (argc % 2 == 0) {
    std::fprintf(stderr, "sharc-attention-bench: %s needs a value\n",
                 argv[argc - 1]);
    return 2;
  }
  std::mt19937 rng(7);
  for (const Shape &s : shapes) {
    // Each rank holds whole chunks (two under the balanced split).
    int64_t chunks = split == SequenceSplit::Balanced ? 2 * ranks : ranks;
    if (ranks > 1 && s.seqLen % chunks != 0) {
      std::fprintf(stderr,
                   "sharc-attention-bench: --cp %lld cuts S=%lld into %lld "
                   "chunks, which do not divide it\n",
                   (long long)ranks, (long long)s.seqLen, (long long)chunks);
      return 2;
    }
    if (!ring) {
      for (const Block &block : blocksOf(s, ranks, split))
        measure(s, block, warmup, iters, rng);
      continue;
    }
    // Each rank's sum over its ring's blocks.
    std::vector<Timed> perRank(static_cast<size_t>(ranks));
    int64_t rows = s.seqLen / ranks;
    for (const Block &block : ringBlocksOf(s, ranks, split)) {
      Timed timed = measure(s, block, warmup, iters, rng);
      int64_t rank = 0;
      while (rowPositions(split, rank, ranks, rows).start !=
             block.queries.start)
        ++rank;
      perRank[rank].sharc += timed.sharc;
      perRank[rank].cudnn += timed.cudnn;
    }
    for (int64_t r = 0; r < ranks; ++r)
      std::printf("S=%-5lld B=%lld H=%lld/%lld D=%-3lld ring %lld rank %lld: "
                  "fwd+bwd over its blocks sharc %.3f ms, cuDNN %.3f ms\n",
                  (long long)s.seqLen, (long long)s.batch,
                  (long long)s.numHeads, (long long)s.numKvHeads,
                  (long long)s.headDim, (long long)ranks, (long long)r,
                  perRank[r].sharc, perRank[r].cudnn);
  }
  return 0;
}
