// KvConfig: the KV cache's shape and size, and how it is planned from a
// memory budget.
//
//   bytes per token = layers x kv_heads x head_dim x (K's + V's bytes_per_elem)
//                   = 2 x layers x kv_heads x head_dim x bytes_per_elem (K, V alike)
//   bytes per block = bytes per token x block_size
//
// bytes_per_elem is 4 (f32), 2 (f16, bf16), and fractional for the block
// formats: 34/32 (q8_0), 18/32 (q4_0). KvBytesPerToken is the one formula of
// the project (KvConfig, KvStorage's layout, kv-calc and bench all use it).
// PlanKvCache picks the number of blocks from --kv-cache-memory, or else from
// memory_utilization x (MemAvailable - weights), capped at what max_num_seqs
// sequences of max_model_len tokens can use. A budget that cannot hold one
// sequence of max_model_len tokens is an error that shows the numbers.
//
// Thread rules: plain values; PlanKvCache reads /proc/meminfo.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "base/status.h"
#include "tensor/dtype.h"

namespace tern {

// Bytes of one KV element of dtype (4, 2, 34/32 for q8_0, ...).
double KvBytesPerElement(DType dtype);

// KV bytes of one token: every layer's K row (kv_heads x head_dim elements
// of k) and V row (of v). Rows of a block format must hold whole blocks
// (CheckKvRow).
int64_t KvBytesPerToken(int32_t num_layers, int32_t num_kv_heads, int32_t head_dim, DType k,
                        DType v);

struct KvConfig {
  int32_t num_layers = 0;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;
  int32_t block_size = 16;
  DType dtype = DType::kF16;     // K's, and V's unless v_dtype is set
  std::optional<DType> v_dtype;  // V's when it differs from K's
  int64_t num_blocks = 0;
  int32_t max_model_len = 0;  // longest sequence (prompt + output) in tokens
  // Hybrid windowed models (SplitKvForWindow): window_group_layers of the
  // num_layers have their own window_group_blocks blocks (holding only
  // those layers' K/V); num_blocks is then the other ("full") layers'
  // blocks, which bound the tokens held. 0: one group of every layer.
  int32_t window_group_layers = 0;
  int64_t window_group_blocks = 0;

  DType KDtype() const { return dtype; }
  DType VDtype() const { return v_dtype.value_or(dtype); }
  // "q8_0", or "K q8_0, V q4_0".
  std::string DtypeName() const;
  int64_t BytesPerToken() const;
  int64_t BytesPerBlock() const { return BytesPerToken() * block_size; }
  // Both groups' blocks.
  int64_t TotalBytes() const;
  int64_t num_tokens() const { return num_blocks * block_size; }
  // Blocks one sequence of n tokens needs.
  int64_t BlocksForTokens(int64_t n) const { return (n + block_size - 1) / block_size; }
  // Sequences of max_model_len tokens that fit at once.
  int64_t MaxConcurrency() const;
  // "KV cache: N blocks = T tokens (X GiB); max concurrency at max_model_len L = C"
  std::string Summary() const;
};

struct KvBudget {
  int64_t kv_cache_memory_bytes = 0;  // > 0: use exactly this
  double memory_utilization = 0.9;    // else this fraction of free RAM...
  int64_t weight_bytes = 0;           // ...after the weights
  int64_t mem_available_bytes = -1;   // -1: read MemAvailable from /proc/meminfo
  int32_t max_num_seqs = 64;
  int32_t max_model_len = 0;          // 0: model_context_len, capped by memory
  int32_t model_context_len = 0;      // the model's trained context
};

// shape: layers/heads/head_dim/block_size/dtype filled; returns it with
// num_blocks and max_model_len set.
StatusOr<KvConfig> PlanKvCache(KvConfig shape, const KvBudget& budget);

// Splits a planned KV cache (cfg from PlanKvCache: num_blocks of every
// layer, max_model_len set) into two groups for a hybrid model whose
// windowed_layers of cfg.num_layers read only the last `window` positions
// (KvConfig::window_group_layers). The same bytes are divided in proportion
// to what a max_model_len sequence holds in each group: every block in the
// full group, and in the windowed group the window's blocks while it
// decodes ((window - 1) / block_size + 2) plus, once, the blocks of a
// prefill chunk of chunk_tokens. At most max_num_seqs such sequences are
// provisioned (less memory when that binds). One max_model_len sequence
// always fits when the unsplit cfg held one. cfg comes back unchanged (one
// group) when the window holds a whole max_model_len sequence.
KvConfig SplitKvForWindow(KvConfig cfg, int32_t windowed_layers, int32_t window,
                          int32_t chunk_tokens, int32_t max_num_seqs);

// MemAvailable of /proc/meminfo in bytes, or nullopt when unreadable.
std::optional<int64_t> ReadMemAvailableBytes();

}  // namespace tern
