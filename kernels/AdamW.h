//===- AdamW.h - decoupled-weight-decay Adam update -------------*- C++ -*-===//
// defines: AdamWArgs, adamw (cpu::, cuda::)
//
// In place, elementwise, exactly in torch.optim.AdamW's order (step >= 1):
//   p  = p * (1 - lr * weightDecay)
//   m  = beta1 m + (1 - beta1) g
//   v  = beta2 v + (1 - beta2) g^2
//   bc1 = 1 - beta1^step,  bc2 = 1 - beta2^step
//   p  = p - (lr / bc1) * m / (sqrt(v) / sqrt(bc2) + eps)
// Math in fp32 (double for F64); p, m, v are rounded to their storage type,
// so pure bf16 training (the original's) keeps bf16 moments.
#pragma once

#include "kernels/TensorView.h"
#include "planner/plan/Status.h"

namespace sharc::kernels {

struct AdamWArgs {
  TensorView param, m, v;
  ConstTensorView grad;
  int64_t numel = 0;
  int64_t step = 1;
  double lr = 5e-4, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weightDecay = 0.01;
};

namespace cpu {
void adamw(const AdamWArgs &args);
} // namespace cpu

namespace cuda {
Status adamw(const AdamWArgs &args, DeviceStream stream);
} // namespace cuda

} // namespace sharc::kernels
