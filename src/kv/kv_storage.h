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
// K and V each have a dtype of kernels::IsKvDtype: F32, F16, BF16, Q8_0 or
// Q4_0. A slot of a block format is num_kv_heads * head_dim / 32 blocks of
// 32 values with their f16 scale along the token's row (all its KV heads
// back to back, so a block may span adjacent heads where head_dim < 32),
// quantized when the token's K/V is written (WriteSlot); the attention
// kernels read the blocks directly (kernels::KvPagesView). Where a K block
// spans heads (head_dim < 32) each block is stored Walsh-Hadamard rotated
// (kernels::KvKeyRotated; ReadSlot undoes it), V never.
//
// The bytes come from one anonymous private mapping (MAP_NORESERVE): pages
// read as zero and become resident on first write, so a large KV budget
// costs neither start-up time nor memory until sequences use it.
//
// Two groups (hybrid windowed models, KvShape::window_group_layers): the
// layers marked windowed live in a second region with its own blocks
// (window_group_blocks of them) and block layout holding only those layers,
// so that their blocks can be released outside the window while the other
// ("full") group keeps every position:
//
//   [num_blocks][full layers][K, V][block_size]...            group 0
//   [window_group_blocks][windowed layers][K, V][block_size]... group 1
//
// Slots and block ids are per group: slot s of a windowed layer is slot s of
// group 1. Without window_group_layers there is one group, laid out as above.
//
// Thread rules: owned by the engine thread; Model::Forward writes it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/huge_pages.h"
#include "base/status.h"
#include "kernels/kernels.h"
#include "tensor/dtype.h"

namespace tern {

struct KvShape {
  int32_t num_layers = 0;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;
  int32_t block_size = 16;
  int64_t num_blocks = 0;
  DType dtype = DType::kF16;     // K's, and V's unless v_dtype is set
  std::optional<DType> v_dtype;  // V's when it differs from K's
  // Not shape but how to map it: 2 MiB pages where the kernel gives them
  // (false: 4 KiB pages; EngineConfig::kv_huge_pages, TERN_KV_HUGEPAGES=0).
  bool huge_pages = true;

  // Hybrid windowed models: true for the layers of the second ("windowed")
  // group, which has window_group_blocks blocks. Empty: one group.
  std::vector<bool> window_group_layers;
  int64_t window_group_blocks = 0;

  DType KDtype() const { return dtype; }
  DType VDtype() const { return v_dtype.value_or(dtype); }
};

// OK when dtype (of K or V) can hold a KV row of num_kv_heads * head_dim
// elements: a KV dtype (f16, bf16, f32, q8_0, q4_0) whose block size divides
// the row. The error names the model's head_dim and KV heads.
Status CheckKvRow(DType dtype, int32_t num_kv_heads, int32_t head_dim);

// A one-line warning when K of dtype k will quantize poorly on this shape,
// else "": a q4_0 K whose blocks of 32 span several heads (head_dim < 32)
// shares one 4-bit scale among channels of very different size; the
// rotated layout (kernels::KvKeyRotated) spreads them but does not save it
// (stories260K, head_dim 8, ctx 512: perplexity +30.6% -> +21.3%, where a
// q8_0 K costs -0.03%). Finer scales do not save it either: 4-bit keys
// with one f16 scale per 8, 4 or 2 values still cost +29%, +25%, +15%
// (docs/quantization.md, "4-bit K below head_dim 32").
std::string KvRowWarning(DType k, int32_t num_kv_heads, int32_t head_dim);

class KvStorage {
 public:
  explicit KvStorage(const KvShape& shape);
  KvStorage(const KvStorage&) = delete;
  KvStorage& operator=(const KvStorage&) = delete;

  const KvShape& shape() const { return shape_; }
  // Group 0's slots (every layer's without a window group).
  int64_t num_slots() const { return shape_.num_blocks * shape_.block_size; }
  // 1 for the layers of the windowed group, else 0.
  int LayerGroup(int layer) const { return layer_group_[layer]; }
  bool has_window_group() const { return group_layers_[1] > 0; }
  // Slots of the layer's group.
  int64_t LayerSlots(int layer) const {
    return GroupBlocks(LayerGroup(layer)) * shape_.block_size;
  }
  // Elements of one slot of one layer: num_kv_heads * head_dim.
  int64_t slot_elems() const { return (int64_t)shape_.num_kv_heads * shape_.head_dim; }
  int64_t slot_bytes() const { return k_slot_bytes(); }  // K's
  int64_t k_slot_bytes() const;   // bytes of one K slot of one layer
  int64_t v_slot_bytes() const;   // bytes of one V slot of one layer
  int64_t total_bytes() const;    // all layers, K and V, both groups

  // Block 0's K (V) of a layer; block b's is block_stride() bytes further on
  // per block (kernels::KvPagesView takes the same three numbers).
  uint8_t* KeyData(int layer) { return memory_.data() + LayerOffset(layer, 0); }
  uint8_t* ValueData(int layer) { return memory_.data() + LayerOffset(layer, 1); }
  const uint8_t* KeyData(int layer) const { return memory_.data() + LayerOffset(layer, 0); }
  const uint8_t* ValueData(int layer) const { return memory_.data() + LayerOffset(layer, 1); }
  // Group 0's (without a window group: every block's).
  int64_t block_stride() const { return (int64_t)block_bytes_[0]; }
  int64_t LayerBlockStride(int layer) const { return (int64_t)block_bytes_[LayerGroup(layer)]; }
  // The view of one layer's K and V the attention kernels read (no block
  // table: each sequence brings its own).
  kernels::KvPagesView LayerView(int layer) const;
  // The K (V) elements of one slot of one layer.
  uint8_t* KeySlot(int layer, int64_t slot) { return KeyData(layer) + SlotOffset(layer, slot, 0); }
  uint8_t* ValueSlot(int layer, int64_t slot) { return ValueData(layer) + SlotOffset(layer, slot, 1); }
  const uint8_t* KeySlot(int layer, int64_t slot) const {
    return KeyData(layer) + SlotOffset(layer, slot, 0);
  }
  const uint8_t* ValueSlot(int layer, int64_t slot) const {
    return ValueData(layer) + SlotOffset(layer, slot, 1);
  }

  // Write/read one slot as f32 (F16 storage converts with the kernels'
  // F16C row conversion, round to nearest even; Q8_0/Q4_0 quantize each
  // block of 32: kernels::StoreKvRow; K rotated first where
  // kernels::KvKeyRotated, StoreKvKeyRow). ReadSlot gives the decoded
  // values (a rotated K rotated back: LoadKvKeyRow).
  void WriteSlot(int layer, int64_t slot, const float* k, const float* v);
  void ReadSlot(int layer, int64_t slot, float* k, float* v) const;

 private:
  int64_t GroupBlocks(int group) const {
    return group == 0 ? shape_.num_blocks : shape_.window_group_blocks;
  }
  // A block holds per layer of its group block_size K slots, then
  // block_size V slots; group 1's blocks start after group 0's.
  size_t LayerOffset(int layer, int kind) const {
    const size_t k = (size_t)shape_.block_size * (size_t)k_slot_bytes();
    const size_t v = (size_t)shape_.block_size * (size_t)v_slot_bytes();
    return group_base_[layer_group_[layer]] + (size_t)layer_index_[layer] * (k + v) +
           (kind == 1 ? k : 0);
  }
  int64_t SlotOffset(int layer, int64_t slot, int kind) const {
    return slot / shape_.block_size * (int64_t)block_bytes_[layer_group_[layer]] +
           slot % shape_.block_size * (kind == 0 ? k_slot_bytes() : v_slot_bytes());
  }

  KvShape shape_;
  std::vector<int> layer_group_;  // per layer: 0 or 1
  std::vector<int> layer_index_;  // per layer: its index within its group
  int group_layers_[2] = {0, 0};
  size_t block_bytes_[2] = {0, 0};  // one block of a group: its layers' K and V
  size_t group_base_[2] = {0, 0};   // byte offset of each group's block 0
  HugePageBuffer memory_;  // group 0's blocks, then group 1's
};

}  // namespace tern
