//===- ByteVector.h - host bytes that a resize does not zero ----*- C++ -*-===//
// defines: DefaultInitAllocator, ByteVector, BytesOf
//
// A tensor's bytes on the host (a checkpoint's, a gathered shard's) are
// always overwritten whole after they are sized. std::vector's resize
// zeroes the new elements first, on one thread, which in memory the
// process has not touched means a page fault per 4 KiB: 2.0-2.2 GB/s on
// the GPU node (10 GiB in 4.8-5.5 s) where first writes on 16 threads take
// 0.47 s. With this allocator a resize only records the size, so
// resizeForOverwrite (planner/plan/HostThreads.h) can make the bytes
// present, and zero, on several threads.
//
// The size constructor and resize() leave new bytes unset: size a
// ByteVector with resizeForOverwrite, or give the value, `ByteVector(n, 0)`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <vector>

namespace sharc {

/// std::allocator whose construct() without arguments default-initialises
/// (a no-op for bytes) instead of value-initialising.
template <typename T> struct DefaultInitAllocator : std::allocator<T> {
  using value_type = T;
  DefaultInitAllocator() = default;
  template <typename U>
  DefaultInitAllocator(const DefaultInitAllocator<U> &) noexcept {}

  // With arguments, std::allocator_traits constructs as std::allocator
  // does (std::construct_at), there being no construct(U *, Args...).
  template <typename U> void construct(U *at) noexcept {
    ::new (static_cast<void *>(at)) U;
  }
};

template <typename Byte>
using BytesOf = std::vector<Byte, DefaultInitAllocator<Byte>>;
using ByteVector = BytesOf<uint8_t>;

} // namespace sharc
