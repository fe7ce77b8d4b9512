//===- ParamInit.cpp - reproducible, shard-independent parameter init -----===//

#include "executor/ParamInit.h"

#include "kernels/TensorView.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <thread>
#include <vector>

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

namespace {

constexpr double kInv53 = 1.0 / 9007199254740992.0; // 2^-53

/// Box-Muller on the counter pair of element `globalIndex` under `key`.
double normalValue(double stddev, uint64_t key, int64_t globalIndex) {
  uint64_t counter = 2 * static_cast<uint64_t>(globalIndex);
  double u1 =
      static_cast<double>((splitmix64(key + counter) >> 11) + 1) * kInv53;
  double u2 = static_cast<double>(splitmix64(key + counter + 1) >> 11) * kInv53;
  return stddev * std::sqrt(-2.0 * std::log(u1)) *
         std::cos(2.0 * std::numbers::pi * u2);
}

/// Shards under this many elements are drawn on the calling thread.
constexpr int64_t kParallelElements = 1 << 20;

} // namespace

double initValue(const plan::InitSpec &spec, uint64_t seed,
                 std::string_view name, int64_t globalIndex) {
  if (spec.kind == "ones")
    return 1.0;
  if (spec.kind == "zeros")
    return 0.0;
  return normalValue(spec.stddev, splitmix64(seed ^ fnv1a(name)), globalIndex);
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
  if (spec.kind != "normal") {
    double value = spec.kind == "ones" ? 1.0 : 0.0;
    for (int64_t i = 0; i < count; ++i)
      kernels::storeElement(view, i, value);
    return Status::ok();
  }
  // A shard's rows are runs of consecutive global indices, so only a row's
  // first element needs the index arithmetic; rows are drawn on several
  // threads (a 7B model's weights are billions of draws), each value still
  // a function of its global index alone.
  uint64_t key = splitmix64(seed ^ fnv1a(name));
  int64_t columns = slice.localShape.empty() ? 1 : slice.localShape.back();
  int64_t rows = columns == 0 ? 0 : count / columns;
  auto drawRows = [&](int64_t firstRow, int64_t endRow) {
    for (int64_t row = firstRow; row < endRow; ++row) {
      int64_t base = row * columns;
      int64_t global = slice.globalIndex(base);
      for (int64_t c = 0; c < columns; ++c)
        kernels::storeElement(view, base + c,
                              normalValue(spec.stddev, key, global + c));
    }
  };
  int64_t threads = std::min<int64_t>(
      std::max(1u, std::thread::hardware_concurrency()), rows);
  if (count < kParallelElements || threads <= 1) {
    drawRows(0, rows);
    return Status::ok();
  }
  std::vector<std::thread> workers;
  int64_t perThread = (rows + threads - 1) / threads;
  for (int64_t first = 0; first < rows; first += perThread)
    workers.emplace_back(drawRows, first, std::min(rows, first + perThread));
  for (std::thread &worker : workers)
    worker.join();
  return Status::ok();
}

} // namespace sharc::exec
