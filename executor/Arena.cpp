//===- Arena.cpp - the per-rank memory regions of a plan ------------------===//

#include "executor/Arena.h"

#include <cstdlib>
#include <cstring>

namespace sharc::exec {

void Arena::FreeDeleter::operator()(std::byte *ptr) const { std::free(ptr); }

Result<Arena> Arena::create(const std::map<plan::Region, int64_t> &sizes,
                            bool poison) {
  Arena arena;
  for (const auto &[region, numBytes] : sizes) {
    if (numBytes < 0)
      return Status::invalidInput(
          std::string("region ") + plan::regionName(region) +
          " has negative size " + std::to_string(numBytes));
    Block block;
    block.numBytes = numBytes;
    if (numBytes > 0) {
      // aligned_alloc wants a multiple of the alignment.
      int64_t rounded = (numBytes + kAlignment - 1) / kAlignment * kAlignment;
      void *memory = std::aligned_alloc(static_cast<size_t>(kAlignment),
                                        static_cast<size_t>(rounded));
      if (!memory)
        return Status::outOfMemory(
            std::string("cannot allocate ") + std::to_string(rounded) +
            " bytes for region " + plan::regionName(region));
      std::memset(memory, 0, static_cast<size_t>(rounded));
      block.memory.reset(static_cast<std::byte *>(memory));
    }
    arena.blocks_[region] = std::move(block);
  }
  if (poison)
    arena.poisonActivations();
  return arena;
}

std::byte *Arena::base(plan::Region region) const {
  auto it = blocks_.find(region);
  return it == blocks_.end() ? nullptr : it->second.memory.get();
}

int64_t Arena::numBytes(plan::Region region) const {
  auto it = blocks_.find(region);
  return it == blocks_.end() ? 0 : it->second.numBytes;
}

void Arena::poisonActivations() {
  // All-ones bytes are a NaN in f32 and bf16 alike (and -1 in i32).
  for (plan::Region region :
       {plan::Region::Activation, plan::Region::Gradient}) {
    auto it = blocks_.find(region);
    if (it != blocks_.end() && it->second.memory)
      std::memset(it->second.memory.get(), 0xff,
                  static_cast<size_t>(it->second.numBytes));
  }
}

void Arena::zero(plan::Region region) {
  auto it = blocks_.find(region);
  if (it != blocks_.end() && it->second.memory)
    std::memset(it->second.memory.get(), 0,
                static_cast<size_t>(it->second.numBytes));
}

} // namespace sharc::exec
