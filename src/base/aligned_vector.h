// std::vector with 64-byte aligned storage: activation rows whose length is
// a multiple of 64 bytes then start on a cache line, so the kernels'
// 32- and 64-byte loads never split across two lines (malloc gives 16-byte
// alignment, which split every 64-byte load of an f32 activation row).
#pragma once

#include <cstddef>
#include <new>
#include <vector>

namespace tern {

template <typename T, std::size_t kAlign = 64>
struct AlignedAllocator {
  using value_type = T;
  template <typename U>
  struct rebind {
    using other = AlignedAllocator<U, kAlign>;
  };
  AlignedAllocator() noexcept = default;
  template <typename U>
  AlignedAllocator(const AlignedAllocator<U, kAlign>&) noexcept {}
  T* allocate(std::size_t n) {
    return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t{kAlign}));
  }
  void deallocate(T* p, std::size_t) noexcept { ::operator delete(p, std::align_val_t{kAlign}); }
  template <typename U>
  bool operator==(const AlignedAllocator<U, kAlign>&) const noexcept {
    return true;
  }
};

template <typename T>
using AlignedVector = std::vector<T, AlignedAllocator<T>>;

}  // namespace tern
