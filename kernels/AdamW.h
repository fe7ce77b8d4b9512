//===- AdamW.h - decoupled-weight-decay Adam update -------------*- C++ -*-===//
// defines: AdamWStepScalars, AdamWArgs, adamwScalars, clipScale,
//          adamw (cpu::, cuda::), AdamWGroup (cuda::)
//
// In place, elementwise, exactly in torch.optim.AdamW's order (step >= 1):
//   p  = p * (1 - lr * weightDecay)
//   m  = beta1 m + (1 - beta1) g
//   v  = beta2 v + (1 - beta2) g^2
//   bc1 = 1 - beta1^step,  bc2 = 1 - beta2^step
//   p  = p - (lr / bc1) * m / (sqrt(v) / sqrt(bc2) + eps)
// Math in fp32 (double for F64); p, m, v are rounded to their storage type,
// so pure bf16 training (the original's) keeps bf16 moments.
// With a master (bf16-mixed: an f32 copy of a bf16 parameter, f32 m and v)
// p above is the master: it is read, updated and stored in fp32, and the
// parameter receives it rounded to its own type (round to nearest even);
// the parameter's old value is never read.
// With clipping (gradNormSq set: the step's squared global gradient norm,
// one f32 in the kernel's memory) g is first scaled, in fp32, as
// torch.nn.utils.clip_grad_norm_ does:
//   g = g * min(1, maxNorm / (sqrt(gradNormSq) + 1e-6))
// Where nonFinite is given, an update that stores a NaN or an infinity in
// p, m, v or the master (as its storage type holds it: a finite f32 that
// rounds to a bf16 infinity counts) sets *nonFinite to 1; nothing clears
// it. The runtime reads it after each step, so a run that diverged stops at
// that step without the state being copied to the host (Divergence.h).
#pragma once

#include "kernels/TensorView.h"
#include "planner/plan/Status.h"

#include <cmath>
#include <memory>
#include <vector>

namespace sharc::kernels {

/// One step's scalars in fp32, each rounded once from double (adamwScalars).
struct AdamWStepScalars {
  float beta1, beta2, oneMinusBeta1, oneMinusBeta2, decay, stepSize, bc2Sqrt,
      eps;
};

struct AdamWArgs {
  TensorView param, m, v;
  ConstTensorView grad;
  int64_t numel = 0;
  int64_t step = 1;
  double lr = 5e-4, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weightDecay = 0.01;
  /// Device only: read the step's scalars from this device memory instead
  /// of forming them from step and lr, so that a launch captured in a CUDA
  /// graph takes each replay's step (the runtime writes them before it).
  const AdamWStepScalars *deviceScalars = nullptr;
  /// Clipping: the squared global gradient norm (where the kernel reads,
  /// host memory on the cpu, device memory on a GPU) and the largest norm;
  /// null: no clipping.
  const float *gradNormSq = nullptr;
  float maxNorm = 0.0f;
  /// bf16-mixed: the f32 master of param (data null: none).
  TensorView master = {};
  /// Set to 1 when a stored value is not finite (host memory on the cpu,
  /// memory the device can write on a GPU); null: not recorded.
  unsigned *nonFinite = nullptr;
};

/// The factor clipping scales every gradient by, each operation an fp32 one
/// rounded once (the CUDA kernels use the same _rn operations).
inline float clipScale(float gradNormSq, float maxNorm) {
  float scale = maxNorm / (std::sqrt(gradNormSq) + 1e-6f);
  return scale < 1.0f ? scale : 1.0f;
}

/// The scalars of args' step and lr, as the cpu forms them in double.
inline AdamWStepScalars adamwScalars(const AdamWArgs &args) {
  double step = static_cast<double>(args.step);
  return {.beta1 = static_cast<float>(args.beta1),
          .beta2 = static_cast<float>(args.beta2),
          .oneMinusBeta1 = static_cast<float>(1.0 - args.beta1),
          .oneMinusBeta2 = static_cast<float>(1.0 - args.beta2),
          .decay = static_cast<float>(1.0 - args.lr * args.weightDecay),
          .stepSize =
              static_cast<float>(args.lr / (1.0 - std::pow(args.beta1, step))),
          .bc2Sqrt =
              static_cast<float>(std::sqrt(1.0 - std::pow(args.beta2, step))),
          .eps = static_cast<float>(args.eps)};
}

namespace cpu {
void adamw(const AdamWArgs &args);

/// How the cpu runs an all-f32 update without a master: over vectors of
/// the widest build the cpu takes (AVX2's 8 lanes on x86-64, else the
/// target's baseline 4), or element by element as every other storage mix
/// is. The bits are the same on every path; tests set the path to compare
/// them (until set back to Fastest).
enum class AdamWPath { Fastest, Baseline, Scalar };
void useAdamWPath(AdamWPath path);
} // namespace cpu

namespace cuda {
Status adamw(const AdamWArgs &args, DeviceStream stream);

/// Many adamw updates as one launch: the tensors of `members` (their step
/// and lr are ignored) with member t's scalars read at byte
/// scalarsOffsets[t] of the step-constants table given to run(). The same
/// arithmetic as adamw, so the same bits; the members' nonFinite is ignored,
/// run() takes the group's.
class AdamWGroup {
public:
  static Result<std::unique_ptr<AdamWGroup>>
  create(const std::vector<AdamWArgs> &members,
         const std::vector<int64_t> &scalarsOffsets);
  ~AdamWGroup();
  AdamWGroup(const AdamWGroup &) = delete;
  AdamWGroup &operator=(const AdamWGroup &) = delete;
  Status run(const void *stepConstants, unsigned *nonFinite,
             DeviceStream stream) const;

private:
  AdamWGroup() = default;
  struct Tables; ///< the device tables
  std::unique_ptr<Tables> tables_;
};
} // namespace cuda

} // namespace sharc::kernels
