//===- Copy.cpp - strided block copies on the host ------------------------===//

#include "kernels/Copy.h"

#include <cstring>

namespace sharc::kernels::cpu {

void copy2d(const Copy2dArgs &args) {
  const auto *src = static_cast<const std::byte *>(args.src);
  auto *dst = static_cast<std::byte *>(args.dst);
  if (src == dst && args.srcPitch == args.dstPitch)
    return;
  for (int64_t r = 0; r < args.rows; ++r)
    std::memmove(dst + r * args.dstPitch, src + r * args.srcPitch,
                 static_cast<size_t>(args.rowBytes));
}

void permuteBlocks(const PermuteBlocksArgs &args) {
  const auto *src = static_cast<const std::byte *>(args.src);
  auto *dst = static_cast<std::byte *>(args.dst);
  auto blockBytes = static_cast<size_t>(args.blockBytes);
  for (size_t i = 0; i < args.order.size(); ++i)
    std::memcpy(dst + i * blockBytes, src + args.order[i] * blockBytes,
                blockBytes);
}

} // namespace sharc::kernels::cpu
