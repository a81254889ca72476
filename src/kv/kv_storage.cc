#include "kv/kv_storage.h"

#include <cstdlib>
#include <cstring>
#include <string_view>

#include "base/check.h"
#include "base/fp16.h"
#include "kernels/kernels.h"

namespace tern {

KvStorage::KvStorage(const KvShape& shape) : shape_(shape) {
  CHECK(shape.dtype == DType::kF32 || shape.dtype == DType::kF16);
  CHECK(shape.num_layers >= 0 && shape.num_kv_heads > 0 && shape.head_dim > 0);
  CHECK(shape.block_size > 0 && shape.num_blocks >= 0);
  block_bytes_ = 2 * (size_t)shape.num_layers * (size_t)shape.block_size * (size_t)slot_bytes();
  const size_t total = (size_t)shape.num_blocks * block_bytes_;
  if (total == 0) return;
  // 2 MiB pages where the kernel gives them (transparent huge pages on
  // request): attention walks the pages of many sequences per step, and
  // small pages cost a TLB miss and, first, a page fault per 4 KiB.
  const char* thp = std::getenv("TERN_KV_HUGEPAGES");  // "0": 4 KiB pages
  memory_ = HugePageBuffer(total, thp == nullptr || std::string_view(thp) != "0");
}

int64_t KvStorage::slot_bytes() const {
  return slot_elems() * (shape_.dtype == DType::kF32 ? 4 : 2);
}

int64_t KvStorage::total_bytes() const {
  return 2 * (int64_t)shape_.num_layers * num_slots() * slot_bytes();
}

namespace {

void StoreRow(DType dtype, const float* src, uint8_t* dst, int64_t n) {
  if (dtype == DType::kF32) {
    std::memcpy(dst, src, n * sizeof(float));
    return;
  }
  kernels::ConvertF32ToF16(src, n, reinterpret_cast<uint16_t*>(dst));
}

void LoadRow(DType dtype, const uint8_t* src, float* dst, int64_t n) {
  if (dtype == DType::kF32) {
    std::memcpy(dst, src, n * sizeof(float));
    return;
  }
  const uint16_t* s = reinterpret_cast<const uint16_t*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = Fp16ToFp32(s[i]);
}

}  // namespace

void KvStorage::WriteSlot(int layer, int64_t slot, const float* k, const float* v) {
  CHECK(layer >= 0 && layer < shape_.num_layers);
  CHECK(slot >= 0 && slot < num_slots());
  StoreRow(shape_.dtype, k, KeySlot(layer, slot), slot_elems());
  StoreRow(shape_.dtype, v, ValueSlot(layer, slot), slot_elems());
}

void KvStorage::ReadSlot(int layer, int64_t slot, float* k, float* v) const {
  CHECK(layer >= 0 && layer < shape_.num_layers);
  CHECK(slot >= 0 && slot < num_slots());
  LoadRow(shape_.dtype, KeySlot(layer, slot), k, slot_elems());
  LoadRow(shape_.dtype, ValueSlot(layer, slot), v, slot_elems());
}

}  // namespace tern
