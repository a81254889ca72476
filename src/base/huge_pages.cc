#include "base/huge_pages.h"

#include <sys/mman.h>

#include <utility>

#include "base/check.h"

namespace tern {

HugePageBuffer::HugePageBuffer(size_t bytes, bool huge) : size_(bytes) {
  if (bytes == 0) return;
  constexpr size_t kHuge = size_t{2} << 20;
  mapped_ = bytes + kHuge;
  map_ = mmap(nullptr, mapped_, PROT_READ | PROT_WRITE,
              MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  CHECK(map_ != MAP_FAILED);  // address space
  data_ = reinterpret_cast<uint8_t*>(((uintptr_t)map_ + kHuge - 1) & ~(uintptr_t)(kHuge - 1));
#ifdef MADV_HUGEPAGE
  if (huge) madvise(data_, bytes, MADV_HUGEPAGE);
#endif
}

HugePageBuffer::~HugePageBuffer() {
  if (mapped_ > 0) munmap(map_, mapped_);
}

HugePageBuffer::HugePageBuffer(HugePageBuffer&& other) noexcept { *this = std::move(other); }

HugePageBuffer& HugePageBuffer::operator=(HugePageBuffer&& other) noexcept {
  if (this != &other) {
    if (mapped_ > 0) munmap(map_, mapped_);
    map_ = std::exchange(other.map_, nullptr);
    mapped_ = std::exchange(other.mapped_, 0);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

}  // namespace tern
