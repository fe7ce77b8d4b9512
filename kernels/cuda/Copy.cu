//===- Copy.cu - strided block copies on a stream -------------------------===//
//
// A contiguous block is one cudaMemcpyAsync. Strided rows go through
// copyRowsKernel, one thread per 16-, 8- or 4-byte word (the widest that
// divides both pointers, both pitches and the row): cudaMemcpy2DAsync moved
// narrow rows (768 to 1536 bytes, as the fused projections' column slices
// and the sequence-parallel unpacking have) at under 1 TB/s on an H200,
// against about 3 TB/s for 16-byte words. Rows of odd sizes still go to
// cudaMemcpy2DAsync.
//
//===----------------------------------------------------------------------===//

#include "kernels/Copy.h"
#include "kernels/cuda/Launch.h"

#include <cstdint>

namespace sharc::kernels::cuda {
namespace {

constexpr int kThreads = 256;
/// Enough blocks to fill an H200 several times over; threads stride on.
constexpr int64_t kMaxBlocks = 132 * 16;

/// Word w of row r: the rows are rowWords words long, pitches in words.
template <typename Word>
__global__ void __launch_bounds__(kThreads)
    copyRowsKernel(const Word *src, Word *dst, int64_t rows, int64_t rowWords,
                   int64_t srcPitch, int64_t dstPitch) {
  int64_t total = rows * rowWords;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < total; i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t r = i / rowWords, w = i % rowWords;
    dst[r * dstPitch + w] = src[r * srcPitch + w];
  }
}

template <typename Word>
Status launchRows(const Copy2dArgs &a, DeviceStream stream) {
  constexpr int64_t kBytes = sizeof(Word);
  int64_t rowWords = a.rowBytes / kBytes;
  auto blocks = static_cast<unsigned>(
      std::min(ceilDiv(a.rows * rowWords, kThreads), kMaxBlocks));
  copyRowsKernel<Word><<<blocks, kThreads, 0, stream>>>(
      static_cast<const Word *>(a.src), static_cast<Word *>(a.dst), a.rows,
      rowWords, a.srcPitch / kBytes, a.dstPitch / kBytes);
  return launchStatus("copyRowsKernel");
}

} // namespace

Status copy2d(const Copy2dArgs &args, DeviceStream stream) {
  if (args.rows == 0 || args.rowBytes == 0 ||
      (args.src == args.dst && args.srcPitch == args.dstPitch))
    return Status::ok();
  if (args.rowBytes == args.srcPitch && args.rowBytes == args.dstPitch) {
    SHARC_CUDA(cudaMemcpyAsync(args.dst, args.src,
                               static_cast<size_t>(args.rows * args.rowBytes),
                               cudaMemcpyDeviceToDevice, stream));
    return Status::ok();
  }
  // The widest word dividing every address and length involved.
  auto bits = reinterpret_cast<uintptr_t>(args.src) |
              reinterpret_cast<uintptr_t>(args.dst) |
              static_cast<uintptr_t>(args.rowBytes) |
              static_cast<uintptr_t>(args.srcPitch) |
              static_cast<uintptr_t>(args.dstPitch);
  if (bits % 16 == 0)
    return launchRows<uint4>(args, stream);
  if (bits % 8 == 0)
    return launchRows<uint2>(args, stream);
  if (bits % 4 == 0)
    return launchRows<uint32_t>(args, stream);
  SHARC_CUDA(cudaMemcpy2DAsync(
      args.dst, static_cast<size_t>(args.dstPitch), args.src,
      static_cast<size_t>(args.srcPitch), static_cast<size_t>(args.rowBytes),
      static_cast<size_t>(args.rows), cudaMemcpyDeviceToDevice, stream));
  return Status::ok();
}

Status permuteBlocks(const PermuteBlocksArgs &args, DeviceStream stream) {
  // Each block is contiguous; the balanced split's orders join none of
  // them, so one copy per block (2 cp of them) on the stream.
  auto blockBytes = static_cast<size_t>(args.blockBytes);
  if (blockBytes == 0)
    return Status::ok();
  const auto *src = static_cast<const char *>(args.src);
  auto *dst = static_cast<char *>(args.dst);
  for (size_t i = 0; i < args.order.size(); ++i)
    SHARC_CUDA(cudaMemcpyAsync(dst + i * blockBytes,
                               src + args.order[i] * blockBytes, blockBytes,
                               cudaMemcpyDeviceToDevice, stream));
  return Status::ok();
}

} // namespace sharc::kernels::cuda
