//===- AdamW.cu - decoupled-weight-decay Adam update on the device --------===//
//
// Implements the math stated in kernels/AdamW.h with the arithmetic of
// cpu/AdamW.cpp: the per-step scalars are formed on the host in double and
// rounded once, every device operation is an explicitly rounded fp32 one
// (no fused multiply-add), and p, m and v are rounded to their storage type
// before the final update reads them. f32 results therefore equal the cpu's
// bit for bit. With a master (bf16-mixed) the update reads and writes the
// f32 master and stores it rounded to the bf16 parameter, as the cpu does.
//
// Launch shape: a 1-D grid-stride grid of 256-thread blocks (at most
// kMaxBlocks). When p, m, v and g are aligned to 4 elements a thread owns 4
// consecutive elements per step, moved as 8- or 16-byte vectors; the last
// numel % 4 elements, or all of an unaligned call, go one per thread. Bound:
// DRAM bandwidth, numel * (2 * (|p| + |m| + |v|) + |g|) bytes; with a
// master, numel * (|p| + 2 * (|master| + |m| + |v|) + |g|).
//
// AdamWGroup updates many tensors in one launch (adamwGroupKernel): a
// table of the tensors and one of fixed-size chunks, both uploaded once,
// one block per chunk (a batch of vector steps of each thread, all loaded
// before any is updated), each tensor's scalars read from the step
// constants. A model's 91 small updates took 0.76 ms as separate launches
// on an H200 (sharc-adamw now gathers them into runs of up to 8 MiB of
// gradients, data parallelism's buckets being runs already).
//
// Non-finite stores: each thread keeps the largest magnitude (as bits) of
// what it stored, a bf16 parameter's shifted so that the f32 values which
// round to a bf16 infinity also reach the f32 infinity's bits, and sets
// the flag once at its end: two integer operations per stored value.
//
//===----------------------------------------------------------------------===//

#include "kernels/AdamW.h"
#include "kernels/cuda/ElementAccess.cuh"
#include "kernels/cuda/Launch.h"

#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

namespace sharc::kernels::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 4096;
constexpr int kVec = 4;

/// The value `value` takes after a store to `dtype` and a load back.
__device__ __forceinline__ float roundTo(DType dtype, float value) {
  if (dtype == DType::BF16)
    return __bfloat162float(__float2bfloat16_rn(value));
  return value;
}

/// The step's scalars, each rounded once from double as the cpu forms them.
using AdamWScalars = AdamWStepScalars;

struct AdamWViews {
  void *param, *m, *v;
  const void *grad;
  DType paramType, mType, vType, gradType;
  const float *gradNormSq; ///< null: no clipping
  float maxNorm;
  void *master; ///< bf16-mixed: the f32 master of param; null: none
  DType masterType;
};

AdamWViews viewsOf(const AdamWArgs &a) {
  return {a.param.data,  a.m.data,  a.v.data,      a.grad.data,
          a.param.dtype, a.m.dtype, a.v.dtype,     a.grad.dtype,
          a.gradNormSq,  a.maxNorm, a.master.data, a.master.dtype};
}

/// clipScale (kernels/AdamW.h) with the same rounded fp32 operations.
__device__ __forceinline__ float gradScaleOf(const AdamWViews &views) {
  if (!views.gradNormSq)
    return 1.0f;
  float scale =
      __fdiv_rn(views.maxNorm, __fadd_rn(__fsqrt_rn(*views.gradNormSq), 1e-6f));
  return scale < 1.0f ? scale : 1.0f;
}

/// What a kernel knows of its tensors' storage when it is compiled: only what
/// the views say at run time, or that param, m, v and the gradient are all
/// bf16 with no master (pure bf16 training). The update is bound by its
/// instruction issue (the correctly rounded divisions and square root), so
/// the per-element dtype tests of the first are worth compiling away.
enum class Storage { FromViews, AllBf16 };

template <Storage S> __device__ __forceinline__ DType storageOf(DType dtype) {
  return S == Storage::AllBf16 ? DType::BF16 : dtype;
}

template <Storage S>
__device__ __forceinline__ void *masterOf(const AdamWViews &views) {
  return S == Storage::AllBf16 ? nullptr : views.master;
}

/// Elements [i, i + N) of an update's four inputs, as float.
template <int N> struct UpdateInputs {
  float grads[N], params[N], ms[N], vs[N];
};

template <Storage S, int N>
__device__ __forceinline__ void loadInputs(const AdamWViews &views, int64_t i,
                                           UpdateInputs<N> &in) {
  // bf16-mixed: the update is the master's; param only receives it.
  const void *master = masterOf<S>(views);
  const void *weights = master ? master : views.param;
  DType weightsType = master ? views.masterType : views.paramType;
  loadN(ConstTensorView{views.grad, storageOf<S>(views.gradType)}, i, in.grads);
  loadN(ConstTensorView{weights, storageOf<S>(weightsType)}, i, in.params);
  loadN(ConstTensorView{views.m, storageOf<S>(views.mType)}, i, in.ms);
  loadN(ConstTensorView{views.v, storageOf<S>(views.vType)}, i, in.vs);
}

/// The bits of |value|: a NaN or an infinity is at least kInfBits.
__device__ __forceinline__ unsigned magnitudeBits(float value) {
  return __float_as_uint(value) & 0x7fffffffu;
}
constexpr unsigned kInfBits = 0x7f800000u;
/// Added to the magnitude of an f32 about to be stored as bf16: from the
/// midpoint between bf16's largest finite value (0x7f7f0000) and its
/// infinity up, round to nearest even stores the infinity.
constexpr unsigned kBf16RoundsToInf = kInfBits - 0x7f7f8000u;

/// Updates elements [i, i + N), stores them, and raises `stored` to the
/// magnitude bits of each value stored (the bf16 parameter's shifted by
/// kBf16RoundsToInf), so that stored >= kInfBits iff one was not finite.
template <Storage S, int N>
__device__ __forceinline__ void
updateAndStore(const AdamWViews &views, const AdamWScalars &s, float gradScale,
               int64_t i, UpdateInputs<N> &in, unsigned &stored) {
  void *master = masterOf<S>(views);
  DType weightsType = storageOf<S>(master ? views.masterType : views.paramType);
  DType mType = storageOf<S>(views.mType), vType = storageOf<S>(views.vType);
  // The parameter's stored value covers the master's (an f32 infinity stays
  // one as bf16).
  unsigned paramShift =
      storageOf<S>(views.paramType) == DType::BF16 ? kBf16RoundsToInf : 0u;
#pragma unroll
  for (int k = 0; k < N; ++k) {
    float grad = __fmul_rn(in.grads[k], gradScale);
    float param = roundTo(weightsType, __fmul_rn(in.params[k], s.decay));
    float m = roundTo(mType, __fadd_rn(__fmul_rn(s.beta1, in.ms[k]),
                                       __fmul_rn(s.oneMinusBeta1, grad)));
    float gradSquared = __fmul_rn(__fmul_rn(s.oneMinusBeta2, grad), grad);
    float v =
        roundTo(vType, __fadd_rn(__fmul_rn(s.beta2, in.vs[k]), gradSquared));
    float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(v), s.bc2Sqrt), s.eps);
    in.params[k] = __fsub_rn(param, __fdiv_rn(__fmul_rn(s.stepSize, m), denom));
    in.ms[k] = m;
    in.vs[k] = v;
    stored = max(stored, max(magnitudeBits(m), magnitudeBits(v)));
    stored = max(stored, magnitudeBits(in.params[k]) + paramShift);
  }
  if (master)
    storeN(TensorView{master, views.masterType}, i, in.params);
  storeN(TensorView{views.param, storageOf<S>(views.paramType)}, i, in.params);
  storeN(TensorView{views.m, mType}, i, in.ms);
  storeN(TensorView{views.v, vType}, i, in.vs);
}

template <Storage S, int N>
__device__ __forceinline__ void
updateElements(const AdamWViews &views, const AdamWScalars &s, float gradScale,
               int64_t i, unsigned &stored) {
  UpdateInputs<N> in;
  loadInputs<S>(views, i, in);
  updateAndStore<S>(views, s, gradScale, i, in, stored);
}

/// A thread's end: the flag, when what it stored was not all finite.
__device__ __forceinline__ void recordNonFinite(unsigned stored,
                                                unsigned *nonFinite) {
  if (stored >= kInfBits && nonFinite)
    *nonFinite = 1u;
}

/// `deviceScalars`, where given, replaces `scalars` (a graph replay's
/// step).
template <Storage S>
__global__ void adamwKernel(AdamWViews views, AdamWScalars scalars,
                            const AdamWScalars *deviceScalars, int64_t numel,
                            int64_t vectorEnd, unsigned *nonFinite) {
  if (deviceScalars)
    scalars = *deviceScalars;
  float gradScale = gradScaleOf(views);
  int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  unsigned stored = 0;
  for (int64_t i = first * kVec; i < vectorEnd; i += stride * kVec)
    updateElements<S, kVec>(views, scalars, gradScale, i, stored);
  for (int64_t i = vectorEnd + first; i < numel; i += stride)
    updateElements<S, 1>(views, scalars, gradScale, i, stored);
  recordNonFinite(stored, nonFinite);
}

bool isVectorAligned(const void *data, DType dtype) {
  return reinterpret_cast<uintptr_t>(data) % (kVec * dtypeSize(dtype)) == 0;
}

/// Whether every tensor of the update (the master too) takes vector moves.
bool allVectorAligned(const AdamWArgs &a) {
  return isVectorAligned(a.param.data, a.param.dtype) &&
         isVectorAligned(a.m.data, a.m.dtype) &&
         isVectorAligned(a.v.data, a.v.dtype) &&
         isVectorAligned(a.grad.data, a.grad.dtype) &&
         (!a.master.data || isVectorAligned(a.master.data, a.master.dtype));
}

/// Whether the update is pure bf16 (Storage::AllBf16).
bool isAllBf16(const AdamWArgs &a) {
  return a.param.dtype == DType::BF16 && a.m.dtype == DType::BF16 &&
         a.v.dtype == DType::BF16 && a.grad.dtype == DType::BF16 &&
         !a.master.data;
}

/// The storage types the kernels take: f32 or bf16, and an f32 master.
Status checkTypes(const AdamWArgs &a, const char *what) {
  SHARC_TRY(checkFloatStorage(
      what, {a.param.dtype, a.m.dtype, a.v.dtype, a.grad.dtype}));
  if (a.master.data && a.master.dtype != DType::F32)
    return Status::invalidInput(std::string(what) + ": a " +
                                dtypeName(a.master.dtype) +
                                " master (expected f32)");
  return Status::ok();
}

/// Vector steps a thread loads before it updates any: a store may alias a
/// later load as far as the compiler knows, so without this each step's
/// loads wait for the last step's stores, one DRAM round trip a step.
constexpr int kStepsInFlight = 2;
/// Elements one block of adamwGroupKernel updates: one batch of vector
/// steps of its 256 threads, one round trip, at 4 blocks an SM. Measured with
/// ncu on MiniMind's 27 MB runs of updates (H200): chunks of 16 steps took
/// 111-118 us (32% of DRAM throughput, 2 blocks an SM for registers); a chunk
/// of one batch of 1, 2 or 4 steps at 4 blocks an SM, 86-91, 75-79 and 100-103
/// us. The kernel is then bound by its correctly rounded divisions and square
/// roots (67% of SM throughput), which keep the cpu's bits.
constexpr int64_t kChunkElements = int64_t(kThreads) * kVec * kStepsInFlight;

/// One tensor of a group, as the device reads it.
struct GroupTensor {
  AdamWViews views;
  int64_t numel, vectorEnd, scalarsOffset;
};

/// Block b updates chunk b: elements [begin, end) of one tensor, with that
/// tensor's scalars from the step constants.
struct GroupChunk {
  int32_t tensor;
  int64_t begin, end;
};

template <Storage S>
__global__ void __launch_bounds__(kThreads, 4)
    adamwGroupKernel(const GroupTensor *tensors, const GroupChunk *chunks,
                     const char *stepConstants, unsigned *nonFinite) {
  GroupChunk chunk = chunks[blockIdx.x];
  const GroupTensor &tensor = tensors[chunk.tensor];
  AdamWViews views = tensor.views;
  AdamWScalars scalars = *reinterpret_cast<const AdamWScalars *>(
      stepConstants + tensor.scalarsOffset);
  float gradScale = gradScaleOf(views);
  int64_t vectorEnd = std::min(chunk.end, tensor.vectorEnd);
  constexpr int64_t kStep = int64_t(kThreads) * kVec;
  unsigned stored = 0;
  for (int64_t i = chunk.begin + threadIdx.x * kVec; i < vectorEnd;
       i += kStep * kStepsInFlight) {
    UpdateInputs<kVec> in[kStepsInFlight];
#pragma unroll
    for (int u = 0; u < kStepsInFlight; ++u)
      if (i + u * kStep < vectorEnd)
        loadInputs<S>(views, i + u * kStep, in[u]);
#pragma unroll
    for (int u = 0; u < kStepsInFlight; ++u)
      if (i + u * kStep < vectorEnd)
        updateAndStore<S>(views, scalars, gradScale, i + u * kStep, in[u],
                          stored);
  }
  for (int64_t i = std::max(chunk.begin, tensor.vectorEnd) + threadIdx.x;
       i < chunk.end; i += kThreads)
    updateElements<S, 1>(views, scalars, gradScale, i, stored);
  recordNonFinite(stored, nonFinite);
}

} // namespace

struct AdamWGroup::Tables {
  GroupTensor *tensors = nullptr;
  GroupChunk *chunks = nullptr;
  int64_t numChunks = 0;
  bool allBf16 = true; ///< every member pure bf16: Storage::AllBf16
  ~Tables() {
    cudaFree(tensors);
    cudaFree(chunks);
  }
};

AdamWGroup::~AdamWGroup() = default;

Result<std::unique_ptr<AdamWGroup>>
AdamWGroup::create(const std::vector<AdamWArgs> &members,
                   const std::vector<int64_t> &scalarsOffsets) {
  if (members.size() != scalarsOffsets.size())
    return Status::invalidInput("adamw group: one scalars offset per tensor");
  std::vector<GroupTensor> tensors;
  std::vector<GroupChunk> chunks;
  bool allBf16 = true;
  for (size_t t = 0; t < members.size(); ++t) {
    const AdamWArgs &a = members[t];
    SHARC_TRY(checkTypes(a, "adamw group"));
    allBf16 = allBf16 && isAllBf16(a);
    bool aligned = allVectorAligned(a);
    tensors.push_back({viewsOf(a), a.numel, aligned ? a.numel / kVec * kVec : 0,
                       scalarsOffsets[t]});
    for (int64_t begin = 0; begin < a.numel; begin += kChunkElements)
      chunks.push_back({static_cast<int32_t>(t), begin,
                        std::min(a.numel, begin + kChunkElements)});
  }
  std::unique_ptr<AdamWGroup> group(new AdamWGroup());
  group->tables_ = std::make_unique<Tables>();
  Tables &tables = *group->tables_;
  tables.numChunks = static_cast<int64_t>(chunks.size());
  tables.allBf16 = allBf16;
  if (chunks.empty())
    return Result<std::unique_ptr<AdamWGroup>>(std::move(group));
  SHARC_CUDA(cudaMalloc(&tables.tensors, tensors.size() * sizeof(GroupTensor)));
  SHARC_CUDA(cudaMalloc(&tables.chunks, chunks.size() * sizeof(GroupChunk)));
  SHARC_CUDA(cudaMemcpy(tables.tensors, tensors.data(),
                        tensors.size() * sizeof(GroupTensor),
                        cudaMemcpyHostToDevice));
  SHARC_CUDA(cudaMemcpy(tables.chunks, chunks.data(),
                        chunks.size() * sizeof(GroupChunk),
                        cudaMemcpyHostToDevice));
  return Result<std::unique_ptr<AdamWGroup>>(std::move(group));
}

Status AdamWGroup::run(const void *stepConstants, unsigned *nonFinite,
                       DeviceStream stream) const {
  if (tables_->numChunks == 0)
    return Status::ok();
  if (!stepConstants)
    return Status::invalidInput("adamw group: no step constants");
  auto kernel = tables_->allBf16 ? adamwGroupKernel<Storage::AllBf16>
                                 : adamwGroupKernel<Storage::FromViews>;
  kernel<<<static_cast<unsigned>(tables_->numChunks), kThreads, 0, stream>>>(
      tables_->tensors, tables_->chunks,
      static_cast<const char *>(stepConstants), nonFinite);
  return launchStatus("adamwGroupKernel");
}

Status adamw(const AdamWArgs &args, DeviceStream stream) {
  SHARC_TRY(checkTypes(args, "adamwKernel"));
  if (args.numel <= 0)
    return Status::ok();
  AdamWScalars scalars = adamwScalars(args);
  AdamWViews views = viewsOf(args);
  bool aligned = allVectorAligned(args);
  int64_t vectorEnd = aligned ? args.numel / kVec * kVec : 0;
  int64_t numThreads = vectorEnd / kVec + (args.numel - vectorEnd);
  auto numBlocks = static_cast<unsigned>(
      std::min(ceilDiv(numThreads, kThreads), kMaxBlocks));
  auto kernel = isAllBf16(args) ? adamwKernel<Storage::AllBf16>
                                : adamwKernel<Storage::FromViews>;
  kernel<<<numBlocks, kThreads, 0, stream>>>(views, scalars, args.deviceScalars,
                                             args.numel, vectorEnd,
                                             args.nonFinite);
  return launchStatus("adamwKernel");
}

} // namespace sharc::kernels::cuda
