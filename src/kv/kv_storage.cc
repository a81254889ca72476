#include "kv/kv_storage.h"

#include <cctype>
#include <cstring>
#include <string>

#include "base/check.h"
#include "base/fp16.h"
#include "kernels/kernels.h"
#include "kv/kv_config.h"

namespace tern {

namespace {

std::string LowerName(DType t) {
  std::string s = DTypeName(t);
  for (char& c : s) c = (char)std::tolower((unsigned char)c);
  return s;
}

}  // namespace

Status CheckKvRow(DType dtype, int32_t num_kv_heads, int32_t head_dim) {
  if (!kernels::IsKvDtype(dtype)) {
    return InvalidArgument(std::string("KV cache dtype ") + LowerName(dtype) +
                           " is not one of f16, bf16, f32, q8_0, q4_0");
  }
  const int64_t row = (int64_t)num_kv_heads * head_dim;
  if (row <= 0 || row % BlockSize(dtype) != 0) {
    return InvalidArgument(
        std::string("KV cache dtype ") + LowerName(dtype) + " stores blocks of " +
        std::to_string(BlockSize(dtype)) + " values along a token's K/V row, but this model's "
        "row is " + std::to_string(num_kv_heads) + " KV heads x head_dim " +
        std::to_string(head_dim) + " = " + std::to_string(row) +
        " values, not a multiple of " + std::to_string(BlockSize(dtype)) +
        "; use f16, bf16 or f32");
  }
  return Status::Ok();
}

std::string KvRowWarning(DType k, int32_t num_kv_heads, int32_t head_dim) {
  if (k != DType::kQ4_0 || head_dim >= 32 || num_kv_heads < 2) return "";
  return "K cache q4_0 with head_dim " + std::to_string(head_dim) + ": each block of 32 " +
         "values spans " + std::to_string(32 / head_dim) + " KV heads of a token under one " +
         "4-bit scale; small heads' scores need more than 4 bits per key value (stories260K: " +
         "perplexity +21%, and +15% even with a scale per 2 values); " +
         "--kv-cache-dtype-k q8_0 keeps K at 8 bits (within 0.2%) with V at q4_0";
}

KvStorage::KvStorage(const KvShape& shape) : shape_(shape) {
  CHECK(shape.num_layers >= 0 && shape.num_kv_heads > 0 && shape.head_dim > 0);
  CHECK(CheckKvRow(shape.KDtype(), shape.num_kv_heads, shape.head_dim).ok());
  CHECK(CheckKvRow(shape.VDtype(), shape.num_kv_heads, shape.head_dim).ok());
  CHECK(shape.block_size > 0 && shape.num_blocks >= 0);
  CHECK(shape.window_group_layers.empty() ||
        (int32_t)shape.window_group_layers.size() == shape.num_layers);
  CHECK_GE(shape.window_group_blocks, 0);
  layer_group_.resize(shape.num_layers);
  layer_index_.resize(shape.num_layers);
  for (int l = 0; l < shape.num_layers; ++l) {
    const int g = shape.window_group_layers.empty() ? 0 : (int)shape.window_group_layers[l];
    layer_group_[l] = g;
    layer_index_[l] = group_layers_[g]++;
  }
  // The one KV-bytes formula (kv_config.h); the layout below splits it into
  // per-layer K and V slots.
  for (int g = 0; g < 2; ++g) {
    block_bytes_[g] = (size_t)KvBytesPerToken(group_layers_[g], shape.num_kv_heads,
                                              shape.head_dim, shape.KDtype(), shape.VDtype()) *
                      (size_t)shape.block_size;
  }
  group_base_[1] = (size_t)shape.num_blocks * block_bytes_[0];
  const size_t total = group_base_[1] + (size_t)GroupBlocks(1) * block_bytes_[1];
  if (total == 0) return;
  // 2 MiB pages where the kernel gives them (transparent huge pages on
  // request): attention walks the pages of many sequences per step, and
  // small pages cost a TLB miss and, first, a page fault per 4 KiB.
  memory_ = HugePageBuffer(total, shape.huge_pages);
}

int64_t KvStorage::k_slot_bytes() const { return RowBytes(shape_.KDtype(), slot_elems()); }
int64_t KvStorage::v_slot_bytes() const { return RowBytes(shape_.VDtype(), slot_elems()); }

int64_t KvStorage::total_bytes() const {
  return shape_.num_blocks * (int64_t)block_bytes_[0] + GroupBlocks(1) * (int64_t)block_bytes_[1];
}

kernels::KvPagesView KvStorage::LayerView(int layer) const {
  kernels::KvPagesView view;
  view.k = KeyData(layer);
  view.v = ValueData(layer);
  view.dtype = shape_.KDtype();
  view.v_dtype = shape_.VDtype();
  view.slot_elems = slot_elems();
  view.block_size = shape_.block_size;
  view.block_stride = LayerBlockStride(layer);
  return view;
}

void KvStorage::WriteSlot(int layer, int64_t slot, const float* k, const float* v) {
  CHECK(layer >= 0 && layer < shape_.num_layers);
  CHECK(slot >= 0 && slot < LayerSlots(layer));
  kernels::StoreKvKeyRow(shape_.KDtype(), k, slot_elems(), shape_.head_dim, KeySlot(layer, slot));
  kernels::StoreKvRow(shape_.VDtype(), v, slot_elems(), ValueSlot(layer, slot));
}

void KvStorage::ReadSlot(int layer, int64_t slot, float* k, float* v) const {
  CHECK(layer >= 0 && layer < shape_.num_layers);
  CHECK(slot >= 0 && slot < LayerSlots(layer));
  kernels::LoadKvKeyRow(shape_.KDtype(), KeySlot(layer, slot), slot_elems(), shape_.head_dim, k);
  kernels::LoadKvElems(shape_.VDtype(), ValueSlot(layer, slot), 0, slot_elems(), v);
}

}  // namespace tern
