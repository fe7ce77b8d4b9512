//===- ParamDraw.h - the normal draw of a parameter's elements --*- C++ -*-===//
// defines: splitmix64, drawLogUnit, drawCosTwoPi, drawNormal (value),
//          NormalDrawArgs, drawNormal (cpu::, cuda::)
//
// Element i of a parameter drawn under key k (executor/ParamInit.h says
// how a name and a seed make k) is
//   u1 = ((splitmix64(k + 2i) >> 11) + 1) / 2^53          in (0, 1]
//   u2 = (splitmix64(k + 2i + 1) >> 11) / 2^53            in [0, 1)
//   w  = stddev * sqrt(-2 ln u1) * cos(2 pi u2)            (Box-Muller)
// with ln and cos evaluated here from additions, multiplications, one
// division and one square root, each rounded to nearest, in a fixed order
// that no compiler may fuse (device intrinsics; host code compiled with
// -ffp-contract=off). A GPU and the host therefore draw the same bits, so a
// model initialised on the device equals the one the cpu backend draws.
// The two functions are within a few units in the last place of libm's
// (ParamInitTest checks them against std::log and std::cos).
//
//   ln u:       u = m 2^e, m in [sqrt(1/2), sqrt(2)), s = (m - 1) / (m + 1),
//               ln m = 2 s (1 + s^2/3 + s^4/5 + ... + s^22/23)
//   cos 2 pi u: the quadrant q of 4u and the angle x of what is left,
//               folded to [0, pi/4]; sin x and cos x by their series to
//               x^19 and x^18.
#pragma once

#include "kernels/HostDevice.h"
#include "kernels/TensorView.h"
#include "planner/plan/Status.h"

#include <cstdint>
#ifndef __CUDA_ARCH__
#include <cmath>
#include <cstring>
#endif

namespace sharc::kernels {

SHARC_HOST_DEVICE inline uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

namespace draw {

// Each rounds once to nearest, and none joins another into an fma.
SHARC_HOST_DEVICE inline double mul(double a, double b) {
#ifdef __CUDA_ARCH__
  return __dmul_rn(a, b);
#else
  return a * b;
#endif
}
SHARC_HOST_DEVICE inline double add(double a, double b) {
#ifdef __CUDA_ARCH__
  return __dadd_rn(a, b);
#else
  return a + b;
#endif
}
SHARC_HOST_DEVICE inline double div(double a, double b) {
#ifdef __CUDA_ARCH__
  return __ddiv_rn(a, b);
#else
  return a / b;
#endif
}
SHARC_HOST_DEVICE inline double sqrt(double a) {
#ifdef __CUDA_ARCH__
  return __dsqrt_rn(a);
#else
  return std::sqrt(a);
#endif
}
SHARC_HOST_DEVICE inline uint64_t bitsOf(double x) {
#ifdef __CUDA_ARCH__
  return static_cast<uint64_t>(__double_as_longlong(x));
#else
  uint64_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  return bits;
#endif
}
SHARC_HOST_DEVICE inline double fromBits(uint64_t bits) {
#ifdef __CUDA_ARCH__
  return __longlong_as_double(static_cast<long long>(bits));
#else
  double x;
  std::memcpy(&x, &bits, sizeof x);
  return x;
#endif
}

/// c[0] z^(N-1) + c[1] z^(N-2) + ... + c[N-1] by Horner's rule, each step
/// a rounded product and a rounded sum.
template <int N>
SHARC_HOST_DEVICE inline double horner(double z, const double (&c)[N]) {
  double p = c[0];
#ifdef __CUDA_ARCH__
#pragma unroll
#endif
  for (int i = 1; i < N; ++i)
    p = add(mul(p, z), c[i]);
  return p;
}

} // namespace draw

/// ln u for a normal double u in (0, 1].
SHARC_HOST_DEVICE inline double drawLogUnit(double u) {
  using namespace draw;
  uint64_t bits = bitsOf(u);
  int exponent = static_cast<int>((bits >> 52) & 0x7ff) - 1023;
  double m = fromBits((bits & 0xfffffffffffffull) | (1023ull << 52));
  if (m > 0x1.6a09e667f3bcdp+0) { // sqrt(2)
    m = mul(m, 0.5);
    exponent += 1;
  }
  double s = div(add(m, -1.0), add(m, 1.0));
  double z = mul(s, s);
  constexpr double kTwoOverOdd[] = {
      // 2/23, 2/21, ..., 2/3
      0x1.642c8590b2164p-4, 0x1.8618618618618p-4, 0x1.af286bca1af28p-4,
      0x1.e1e1e1e1e1e1ep-4, 0x1.1111111111111p-3, 0x1.3b13b13b13b14p-3,
      0x1.745d1745d1746p-3, 0x1.c71c71c71c71cp-3, 0x1.2492492492492p-2,
      0x1.999999999999ap-2, 0x1.5555555555555p-1};
  double p = horner(z, kTwoOverOdd);
  double logM = add(add(s, s), mul(mul(s, z), p));
  return add(mul(static_cast<double>(exponent), 0x1.62e42fefa39efp-1), logM);
}

/// cos(2 pi u) for u in [0, 1).
SHARC_HOST_DEVICE inline double drawCosTwoPi(double u) {
  using namespace draw;
  double t = mul(u, 4.0); // exact
  int quadrant = static_cast<int>(t);
  double r = add(t, -static_cast<double>(quadrant)); // exact, in [0, 1)
  // cos(q pi/2 + r pi/2): past r = 1/2 the complement's sine or cosine.
  bool folded = r > 0.5;
  double x = mul(folded ? add(1.0, -r) : r, 0x1.921fb54442d18p+0); // pi/2
  double z = mul(x, x);
  bool cosine = ((quadrant & 1) == 0) != folded;
  // 1 - z/2! + z^2/4! - ... - z^9/18!
  constexpr double kCosine[] = {-0x1.6827863b97d97p-53,
                                0x1.ae7f3e733b81fp-45,
                                -0x1.93974a8c07c9dp-37,
                                0x1.1eed8eff8d898p-29,
                                -0x1.27e4fb7789f5cp-22,
                                0x1.a01a01a01a01ap-16,
                                -0x1.6c16c16c16c17p-10,
                                0x1.5555555555555p-5,
                                -0x1.0p-1,
                                1.0};
  // x (1 - z/3! + z^2/5! - ... - z^9/19!)
  constexpr double kSine[] = {-0x1.2f49b46814157p-57, 0x1.952c77030ad4ap-49,
                              -0x1.ae7f3e733b81fp-41, 0x1.6124613a86d09p-33,
                              -0x1.ae64567f544e4p-26, 0x1.71de3a556c734p-19,
                              -0x1.a01a01a01a01ap-13, 0x1.1111111111111p-7,
                              -0x1.5555555555555p-3,  1.0};
  double value = cosine ? horner(z, kCosine) : mul(x, horner(z, kSine));
  return quadrant == 1 || quadrant == 2 ? -value : value;
}

/// The value of element `index` under `key` (the formula above).
SHARC_HOST_DEVICE inline double drawNormal(double stddev, uint64_t key,
                                           int64_t index) {
  using namespace draw;
  uint64_t counter = 2 * static_cast<uint64_t>(index);
  constexpr double kInv53 = 0x1.0p-53;
  double u1 =
      mul(static_cast<double>((splitmix64(key + counter) >> 11) + 1), kInv53);
  double u2 =
      mul(static_cast<double>(splitmix64(key + counter + 1) >> 11), kInv53);
  return mul(mul(stddev, draw::sqrt(mul(-2.0, drawLogUnit(u1)))),
             drawCosTwoPi(u2));
}

/// A shard's elements drawn in place: row r's columns are the consecutive
/// global indices rowStarts[r], rowStarts[r] + 1, ...
struct NormalDrawArgs {
  TensorView out;
  const int64_t *rowStarts = nullptr; ///< rows entries, host memory
  int64_t rows = 0, columns = 0;
  uint64_t key = 0;
  double stddev = 0.0;
};

namespace cpu {
/// Any float storage; rows over the host's threads.
void drawNormal(const NormalDrawArgs &args);
/// kernels::drawNormal, compiled where no product may join a sum.
double drawNormalValue(double stddev, uint64_t key, int64_t index);
} // namespace cpu

namespace cuda {
/// F32 or BF16 storage on the current device; copies rowStarts to the
/// device, and has finished when it returns.
Status drawNormal(const NormalDrawArgs &args);
} // namespace cuda

} // namespace sharc::kernels
