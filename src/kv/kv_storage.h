// KvStorage: the K and V bytes of every layer, in pages (blocks) of
// block_size token slots, addressed by block id. Layout per layer, for K and
// for V alike:
//
//   [num_blocks][block_size][num_kv_heads][head_dim]  elements of dtype
//
// so slot s = block_id * block_size + offset holds num_kv_heads * head_dim
// contiguous elements. dtype is F32 or F16 (quantized KV dtypes later slot in
// here and in the attention kernels, not in model code).
//
// The bytes come from one anonymous private mapping (MAP_NORESERVE): pages
// read as zero and become resident on first write, so a large KV budget
// costs neither start-up time nor memory until sequences use it.
//
// Thread rules: owned by the engine thread; Model::Forward writes it.
#pragma once

#include <cstdint>
#include <vector>

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
  ~KvStorage();
  KvStorage(const KvStorage&) = delete;
  KvStorage& operator=(const KvStorage&) = delete;

  const KvShape& shape() const { return shape_; }
  int64_t num_slots() const { return shape_.num_blocks * shape_.block_size; }
  // Elements of one slot of one layer: num_kv_heads * head_dim.
  int64_t slot_elems() const { return (int64_t)shape_.num_kv_heads * shape_.head_dim; }
  int64_t slot_bytes() const;     // bytes of one slot of one layer (K or V)
  int64_t total_bytes() const;    // all layers, K and V

  uint8_t* KeyData(int layer) { return base_ + (2 * (size_t)layer) * layer_bytes_; }
  uint8_t* ValueData(int layer) { return base_ + (2 * (size_t)layer + 1) * layer_bytes_; }
  const uint8_t* KeyData(int layer) const { return base_ + (2 * (size_t)layer) * layer_bytes_; }
  const uint8_t* ValueData(int layer) const {
    return base_ + (2 * (size_t)layer + 1) * layer_bytes_;
  }

  // Scalar helpers (tests, reference paths): write/read one slot as f32.
  void WriteSlot(int layer, int64_t slot, const float* k, const float* v);
  void ReadSlot(int layer, int64_t slot, float* k, float* v) const;

 private:
  KvShape shape_;
  size_t layer_bytes_ = 0;    // K (or V) of one layer
  size_t mapped_bytes_ = 0;   // 0: nothing mapped
  void* map_base_ = nullptr;  // the mapping (base_ rounded up to 2 MiB)
  uint8_t* base_ = nullptr;   // [layer][K, V][layer_bytes_]
};

}  // namespace tern
