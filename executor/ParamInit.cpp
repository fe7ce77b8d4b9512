//===- ParamInit.cpp - reproducible, shard-independent parameter init -----===//

#include "executor/ParamInit.h"

#include "kernels/TensorView.h"

#include <cmath>
#include <numbers>

namespace sharc::exec {

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t fnv1a(std::string_view text) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (char c : text) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 0x100000001b3ull;
  }
  return hash;
}

double initValue(const plan::InitSpec &spec, uint64_t seed,
                 std::string_view name, int64_t globalIndex) {
  if (spec.kind == "ones")
    return 1.0;
  if (spec.kind == "zeros")
    return 0.0;
  constexpr double kInv53 = 1.0 / 9007199254740992.0; // 2^-53
  uint64_t key = splitmix64(seed ^ fnv1a(name));
  uint64_t counter = 2 * static_cast<uint64_t>(globalIndex);
  double u1 =
      static_cast<double>((splitmix64(key + counter) >> 11) + 1) * kInv53;
  double u2 = static_cast<double>(splitmix64(key + counter + 1) >> 11) * kInv53;
  return spec.stddev * std::sqrt(-2.0 * std::log(u1)) *
         std::cos(2.0 * std::numbers::pi * u2);
}

Status initShard(const plan::InitSpec &spec, uint64_t seed,
                 std::string_view name, const ShardSlice &slice, void *local,
                 DType dtype) {
  if (spec.kind != "normal" && spec.kind != "ones" && spec.kind != "zeros")
    return Status::invalidInput("parameter '" + std::string(name) +
                                "' has unknown init kind '" + spec.kind +
                                "' (expected normal, ones or zeros)");
  kernels::TensorView view{local, dtype};
  int64_t count = numElements(slice.localShape);
  for (int64_t i = 0; i < count; ++i)
    kernels::storeElement(view, i,
                          initValue(spec, seed, name, slice.globalIndex(i)));
  return Status::ok();
}

} // namespace sharc::exec
