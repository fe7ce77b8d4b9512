//===- Matmul.cpp - linear layer GEMMs on the cpu -------------------------===//
//
// Implements the math stated in kernels/Matmul.h. All three GEMMs reduce to
// one row-major C[M,N] = A[M,K] B[K,N] on contiguous Acc arrays, converted
// from storage once per call (transposing where the layout needs it):
//   forward: A = x,    B = w^T   (C = y)
//   dgrad:   A = dy,   B = w     (C = dx)
//   wgrad:   A = dy^T, B = x     (C = dw)
// The float core packs B into panels of two vectors' width and keeps a tile
// of 4 rows by 2 vectors of C in registers across the whole K loop, written
// with GCC's vector extension so that the tile stays in registers whatever
// the optimiser does, and built twice (baseline SSE2 and AVX2, picked at
// run time; speeds at multiplyBaseline). Every element of C is the sum of its
// K products in K order, each product and sum rounded once, on every path:
// the same bits as plain scalar loops. Doubles (the tests' f64 reference)
// take such scalar loops.
//
//===----------------------------------------------------------------------===//

#include "kernels/Matmul.h"
#include "kernels/cpu/FloatVectors.h"
#include "kernels/cpu/KernelThreads.h"
#include "planner/plan/HostThreads.h"

#include <algorithm>
#include <atomic>
#include <type_traits>
#include <vector>

namespace sharc::kernels::cpu {
namespace {

/// Reads a [rows, cols] tensor into a contiguous array, transposed to
/// [cols, rows] when asked: in blocks of 32 x 32, so that the transposed
/// writes stay within a few cache lines, and f32 into floats as a copy.
template <typename Acc>
std::vector<Acc> loadMatrix(ConstTensorView view, int64_t rows, int64_t cols,
                            bool transpose) {
  std::vector<Acc> values(rows * cols);
  const float *floats = nullptr;
  if constexpr (std::is_same_v<Acc, float>)
    if (view.dtype == DType::F32)
      floats = static_cast<const float *>(view.data);
  if (floats && !transpose) {
    std::copy(floats, floats + rows * cols, values.begin());
    return values;
  }
  constexpr int64_t kBlock = 32;
  for (int64_t r0 = 0; r0 < rows; r0 += kBlock)
    for (int64_t c0 = 0; c0 < cols; c0 += kBlock)
      for (int64_t r = r0; r < std::min(rows, r0 + kBlock); ++r)
        for (int64_t c = c0; c < std::min(cols, c0 + kBlock); ++c) {
          int64_t at = r * cols + c;
          Acc value =
              floats ? floats[at] : static_cast<Acc>(loadElement(view, at));
          values[transpose ? c * rows + r : at] = value;
        }
  return values;
}

template <typename Acc>
void storeMatrix(TensorView view, const std::vector<Acc> &values) {
  if constexpr (std::is_same_v<Acc, float>)
    if (view.dtype == DType::F32) {
      std::copy(values.begin(), values.end(), static_cast<float *>(view.data));
      return;
    }
  for (int64_t i = 0; i < static_cast<int64_t>(values.size()); ++i)
    storeElement(view, i, values[i]);
}

// Floats4 and Floats8 (FloatVectors.h): every element of C sums its k
// products in the same order on every path, the bits of plain scalar code.

/// useBaselineGemm's setting.
std::atomic<bool> baselineOnly{false};

constexpr int64_t kTileRows = 4;
/// A tile of kTileRows x 2 vectors: 8 accumulator registers, half of SSE's
/// and AVX2's 16, so that the B row and the broadcast A values fit beside.
constexpr int64_t kPanelVectors = 2;

/// C[TileRows rows, numCols columns] = A rows times one packed B panel of
/// kPanelVectors vectors a row; the tile stays in registers across k.
template <typename V, int64_t TileRows>
[[gnu::always_inline]] inline void
multiplyTile(const float *__restrict a, int64_t k,
             const float *__restrict panel, float *__restrict c, int64_t n,
             int64_t numCols) {
  constexpr int64_t width = kPanelVectors * V::kLanes;
  typename V::Vec tile[TileRows][kPanelVectors] = {};
  for (int64_t kk = 0; kk < k; ++kk) {
    typename V::Vec panelRow[kPanelVectors];
    for (int64_t v = 0; v < kPanelVectors; ++v)
      panelRow[v] = *reinterpret_cast<const typename V::Unaligned *>(
          panel + kk * width + v * V::kLanes);
    for (int64_t r = 0; r < TileRows; ++r) {
      float aValue = a[r * k + kk];
      for (int64_t v = 0; v < kPanelVectors; ++v)
        tile[r][v] += aValue * panelRow[v];
    }
  }
  for (int64_t r = 0; r < TileRows; ++r) {
    // The panel's last columns may lie past C's: they go through a row.
    float row[width];
    float *out = numCols == width ? c + r * n : row;
    for (int64_t v = 0; v < kPanelVectors; ++v)
      *reinterpret_cast<typename V::Unaligned *>(out + v * V::kLanes) =
          tile[r][v];
    if (out == row)
      std::copy(row, row + numCols, c + r * n);
  }
}

/// C[m,n] = A[m,k] B[k,n] in floats, row-major, A contiguous, B and C rows
/// `ld` floats apart (n where they are whole; a share of the columns
/// starts inside them): B packed panel by panel (zero padding lets every
/// panel run the full-width tile), each panel swept by tiles of A's rows.
template <typename V>
[[gnu::always_inline]] inline void
multiplyFloats(const float *a, const float *b, float *c, int64_t m, int64_t n,
               int64_t k, int64_t ld) {
  constexpr int64_t width = kPanelVectors * V::kLanes;
  std::vector<float> panel(k * width);
  for (int64_t col = 0; col < n; col += width) {
    int64_t numCols = std::min(width, n - col);
    for (int64_t kk = 0; kk < k; ++kk)
      for (int64_t j = 0; j < width; ++j)
        panel[kk * width + j] = j < numCols ? b[kk * ld + col + j] : 0.0f;
    int64_t row = 0;
    for (; row + kTileRows <= m; row += kTileRows)
      multiplyTile<V, kTileRows>(a + row * k, k, panel.data(),
                                 c + row * ld + col, ld, numCols);
    for (; row < m; ++row)
      multiplyTile<V, 1>(a + row * k, k, panel.data(), c + row * ld + col, ld,
                         numCols);
  }
}

/// Built for the target's baseline (4 lanes; SSE2 on x86-64) and, on x86-64,
/// for AVX2 (8 lanes, no fma), chosen at run time by what the cpu has: the
/// same bits either way.
/// At m=512, n=2432, k=768, f32, conversions included, on one core of the
/// build machine (a Xeon with AVX-512; thread cpu time, best of 7): SSE2
/// 9.4, AVX2 35.4 GFLOP/s, where the scalar loops this replaced ran at 3.3
/// built -O3 (GCC vectorised them across the tile's rows) and 6.7 built
/// -O2. AVX-512 without fma ran no faster than AVX2 there.
void multiplyBaseline(const float *a, const float *b, float *c, int64_t m,
                      int64_t n, int64_t k, int64_t ld) {
  multiplyFloats<Floats4>(a, b, c, m, n, k, ld);
}
#if defined(__x86_64__)
[[gnu::target("avx2")]] void multiplyAvx2(const float *a, const float *b,
                                          float *c, int64_t m, int64_t n,
                                          int64_t k, int64_t ld) {
  multiplyFloats<Floats8>(a, b, c, m, n, k, ld);
}
#endif

/// Multiply-adds below which a share of a GEMM is not worth a thread of
/// its own: starting one costs tens of microseconds, about what an AVX2
/// core needs for a few million (a tiny test model's GEMMs stay on the
/// caller's thread).
constexpr int64_t kMultiplyAddsPerShare = int64_t{1} << 23;

/// C[m,n] = A[m,k] B[k,n] in doubles (the f64 reference of tests), the
/// same sums in the same order.
void multiplyDoubles(const double *a, const double *b, double *c, int64_t m,
                     int64_t n, int64_t k) {
  for (int64_t row = 0; row < m; ++row)
    for (int64_t col = 0; col < n; ++col) {
      double sum = 0.0;
      for (int64_t kk = 0; kk < k; ++kk)
        sum += a[row * k + kk] * b[kk * n + col];
      c[row * n + col] = sum;
    }
}

template <typename Acc>
std::vector<Acc> multiply(const std::vector<Acc> &a, const std::vector<Acc> &b,
                          int64_t m, int64_t n, int64_t k) {
  std::vector<Acc> c(m * n);
  if constexpr (std::is_same_v<Acc, double>) {
    multiplyDoubles(a.data(), b.data(), c.data(), m, n, k);
  } else {
    auto kernel = multiplyBaseline; // elsewhere: 4-lane vectors of the target
    int64_t width = kPanelVectors * Floats4::kLanes;
#if defined(__x86_64__)
    if (cpuHasAvx2() && !baselineOnly.load(std::memory_order_relaxed)) {
      kernel = multiplyAvx2;
      width = kPanelVectors * Floats8::kLanes;
    }
#endif
    // Shares of whole panels of C's columns, one thread each: every
    // element is still one thread's sum in k order, so the bits do not
    // depend on the count.
    int64_t panels = (n + width - 1) / width;
    int64_t shares =
        std::min(panels, shareCount(m * n * k, kMultiplyAddsPerShare));
    runShares(shares, [&](int64_t share) {
      int64_t first = panels * share / shares * width;
      int64_t last = std::min(n, panels * (share + 1) / shares * width);
      kernel(a.data(), b.data() + first, c.data() + first, m, last - first, k,
             n);
    });
  }
  return c;
}

/// Rows of x at most this many take multiplyFewRows.
constexpr int64_t kFewRows = 8;
/// Its shares are smaller than a GEMM's: each reads its block of w once,
/// bound by memory, not by the products (2^19 f32 weights are 2 MiB).
constexpr int64_t kFewRowsMultiplyAddsPerShare = int64_t{1} << 19;

/// y[m,n] = x[m,k] w[n,k]^T for a few rows of x (a decode step's one
/// position a sample), reading w's rows where they lie, eight at a time
/// into floats, instead of a transposed copy of all of w, which costs as
/// much as the products when m is small. Eight outputs' sums run side by
/// side, each from 0 over its k products in k order: multiply's bits.
void multiplyFewRows(const std::vector<float> &x, ConstTensorView w,
                     std::vector<float> &y, int64_t m, int64_t n, int64_t k) {
  constexpr int64_t kBlock = 8;
  int64_t blocks = (n + kBlock - 1) / kBlock;
  int64_t shares =
      std::min(blocks, shareCount(m * n * k, kFewRowsMultiplyAddsPerShare));
  runShares(shares, [&](int64_t share) {
    std::vector<float> rows(kBlock * k, 0.0f);
    for (int64_t block = blocks * share / shares;
         block < blocks * (share + 1) / shares; ++block) {
      int64_t first = block * kBlock, count = std::min(kBlock, n - first);
      if (w.dtype == DType::F32) {
        const float *from = static_cast<const float *>(w.data) + first * k;
        std::copy(from, from + count * k, rows.begin());
      } else {
        for (int64_t i = 0; i < count * k; ++i)
          rows[i] = static_cast<float>(loadElement(w, first * k + i));
      }
      std::fill(rows.begin() + count * k, rows.end(), 0.0f);
      for (int64_t i = 0; i < m; ++i) {
        const float *xRow = x.data() + i * k;
        float sums[kBlock] = {};
        for (int64_t kk = 0; kk < k; ++kk)
          for (int64_t j = 0; j < kBlock; ++j)
            sums[j] += xRow[kk] * rows[j * k + kk];
        std::copy(sums, sums + count, y.begin() + i * n + first);
      }
    }
  });
}

/// values += the addend, when there is one, before the rounding to storage.
template <typename Acc>
void addAddend(std::vector<Acc> &values, ConstTensorView addend) {
  if (!addend.data)
    return;
  for (int64_t i = 0; i < static_cast<int64_t>(values.size()); ++i)
    values[i] += static_cast<Acc>(loadElement(addend, i));
}

template <typename Acc> void matmulImpl(const MatmulArgs &args) {
  auto x = loadMatrix<Acc>(args.x, args.m, args.k, /*transpose=*/false);
  if constexpr (std::is_same_v<Acc, float>)
    if (args.m <= kFewRows) {
      std::vector<float> y(args.m * args.n);
      multiplyFewRows(x, args.w, y, args.m, args.n, args.k);
      addAddend(y, args.addend);
      storeMatrix(args.y, y);
      return;
    }
  auto wT = loadMatrix<Acc>(args.w, args.n, args.k, /*transpose=*/true);
  auto y = multiply(x, wT, args.m, args.n, args.k);
  addAddend(y, args.addend);
  storeMatrix(args.y, y);
}

template <typename Acc> void matmulDgradImpl(const MatmulDgradArgs &args) {
  auto dy = loadMatrix<Acc>(args.dy, args.m, args.n, /*transpose=*/false);
  auto w = loadMatrix<Acc>(args.w, args.n, args.k, /*transpose=*/false);
  auto dx = multiply(dy, w, args.m, args.k, args.n);
  addAddend(dx, args.addend);
  storeMatrix(args.dx, dx);
}

template <typename Acc> void matmulWgradImpl(const MatmulWgradArgs &args) {
  auto dyT = loadMatrix<Acc>(args.dy, args.m, args.n, /*transpose=*/true);
  auto x = loadMatrix<Acc>(args.x, args.m, args.k, /*transpose=*/false);
  storeMatrix(args.dw, multiply(dyT, x, args.n, args.k, args.m));
}

bool anyF64(ConstTensorView a, ConstTensorView b, ConstTensorView c) {
  return a.dtype == DType::F64 || b.dtype == DType::F64 ||
         c.dtype == DType::F64;
}

} // namespace

void useBaselineGemm(bool baseline) {
  baselineOnly.store(baseline, std::memory_order_relaxed);
}

void matmul(const MatmulArgs &args) {
  if (anyF64(args.x, args.w, args.y) || args.addend.dtype == DType::F64)
    matmulImpl<double>(args);
  else
    matmulImpl<float>(args);
}

void matmulDgrad(const MatmulDgradArgs &args) {
  if (anyF64(args.dy, args.w, args.dx) || args.addend.dtype == DType::F64)
    matmulDgradImpl<double>(args);
  else
    matmulDgradImpl<float>(args);
}

void matmulWgrad(const MatmulWgradArgs &args) {
  if (anyF64(args.dy, args.x, args.dw))
    matmulWgradImpl<double>(args);
  else
    matmulWgradImpl<float>(args);
}

} // namespace sharc::kernels::cpu
