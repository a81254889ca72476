// HugePageBuffer: anonymous memory at a 2 MiB-aligned address, advised into
// transparent huge pages where the kernel gives them, so that long streams
// through it do not miss the TLB every 4 KiB. Zero-filled; pages are taken
// when first written (MAP_NORESERVE). Released on destruction; move-only.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tern {

class HugePageBuffer {
 public:
  HugePageBuffer() = default;
  // huge = false keeps 4 KiB pages (same alignment).
  explicit HugePageBuffer(size_t bytes, bool huge = true);
  ~HugePageBuffer();
  HugePageBuffer(HugePageBuffer&& other) noexcept;
  HugePageBuffer& operator=(HugePageBuffer&& other) noexcept;
  HugePageBuffer(const HugePageBuffer&) = delete;
  HugePageBuffer& operator=(const HugePageBuffer&) = delete;

  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  void* map_ = nullptr;  // the mapping (data_ rounded up to 2 MiB)
  size_t mapped_ = 0;    // 0: nothing mapped
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace tern
