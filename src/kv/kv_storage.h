// KvStorage: the K and V bytes of every layer, in pages (blocks) of
// block_size token slots, addressed by block id. Block-major layout:
//
//   [num_blocks][num_layers][K, V][block_size][num_kv_heads][head_dim]
//
// so one block holds its slots for every layer, and slot s (block s /
// block_size, offset s % block_size) of one layer holds num_kv_heads *
// head_dim contiguous elements. A block's K of one layer is block_size
// contiguous slots; from one block to the next is block_stride() bytes.
// Block-major, a newly used block touches one contiguous range (one 2 MiB
// page fault every few blocks) instead of a new range in every layer at once.
// dtype is F32 or F16 (quantized KV dtypes later slot in here and in the
// attention kernels, not in model code).
//
// The bytes come from one anonymous private mapping (MAP_NORESERVE): pages
// read as zero and become resident on first write, so a large KV budget
// costs neither start-up time nor memory until sequences use it.
//
// Thread rules: owned by the engine thread; Model::Forward writes it.
#pragma once

#include <cstdint>
#include <vector>

#include "base/huge_pages.h"
#include "tensor/dtype.h"

namespace tern {

struct KvShape {
  int32_t num_layers = 0;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;
  int32_t block_size = 16;
  int64_t num_blocks = 0;
  DType dtype = DType::kF16;
};

class KvStorage {
 public:
  explicit KvStorage(const KvShape& shape);
  KvStorage(const KvStorage&) = delete;
  KvStorage& operator=(const KvStorage&) = delete;

  const KvShape& shape() const { return shape_; }
  int64_t num_slots() const { return shape_.num_blocks * shape_.block_size; }
  // Elements of one slot of one layer: num_kv_heads * head_dim.
  int64_t slot_elems() const { return (int64_t)shape_.num_kv_heads * shape_.head_dim; }
  int64_t slot_bytes() const;     // bytes of one slot of one layer (K or V)
  int64_t total_bytes() const;    // all layers, K and V

  // Block 0's K (V) of a layer; block b's is block_stride() bytes further on
  // per block (kernels::KvPagesView takes the same three numbers).
  uint8_t* KeyData(int layer) { return memory_.data() + LayerOffset(layer, 0); }
  uint8_t* ValueData(int layer) { return memory_.data() + LayerOffset(layer, 1); }
  const uint8_t* KeyData(int layer) const { return memory_.data() + LayerOffset(layer, 0); }
  const uint8_t* ValueData(int layer) const { return memory_.data() + LayerOffset(layer, 1); }
  int64_t block_stride() const { return (int64_t)block_bytes_; }
  // The K (V) elements of one slot of one layer.
  uint8_t* KeySlot(int layer, int64_t slot) { return KeyData(layer) + SlotOffset(slot); }
  uint8_t* ValueSlot(int layer, int64_t slot) { return ValueData(layer) + SlotOffset(slot); }
  const uint8_t* KeySlot(int layer, int64_t slot) const {
    return KeyData(layer) + SlotOffset(slot);
  }
  const uint8_t* ValueSlot(int layer, int64_t slot) const {
    return ValueData(layer) + SlotOffset(slot);
  }

  // Write/read one slot as f32 (F16 storage converts with the kernels'
  // F16C row conversion, round to nearest even).
  void WriteSlot(int layer, int64_t slot, const float* k, const float* v);
  void ReadSlot(int layer, int64_t slot, float* k, float* v) const;

 private:
  size_t LayerOffset(int layer, int kind) const {
    return (2 * (size_t)layer + kind) * (size_t)shape_.block_size * (size_t)slot_bytes();
  }
  int64_t SlotOffset(int64_t slot) const {
    return slot / shape_.block_size * (int64_t)block_bytes_ +
           slot % shape_.block_size * slot_bytes();
  }

  KvShape shape_;
  size_t block_bytes_ = 0;    // one block: every layer's K and V
  HugePageBuffer memory_;  // [num_blocks][block_bytes_]
};

}  // namespace tern
