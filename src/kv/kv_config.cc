#include "kv/kv_config.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace tern {
namespace {

std::string Gib(double bytes) {
  char buf[64];
  if (bytes >= 1024.0 * 1024 * 1024) {
    std::snprintf(buf, sizeof(buf), "%.2f GiB", bytes / (1024.0 * 1024 * 1024));
  } else {
    std::snprintf(buf, sizeof(buf), "%.2f MiB", bytes / (1024.0 * 1024));
  }
  return buf;
}

}  // namespace

double KvBytesPerElement(DType dtype) {
  return (double)BlockBytes(dtype) / (double)BlockSize(dtype);
}

int64_t KvBytesPerToken(int32_t num_layers, int32_t num_kv_heads, int32_t head_dim, DType k,
                        DType v) {
  const int64_t row = (int64_t)num_kv_heads * head_dim;
  return (int64_t)num_layers * (RowBytes(k, row) + RowBytes(v, row));
}

int64_t KvConfig::BytesPerToken() const {
  return KvBytesPerToken(num_layers, num_kv_heads, head_dim, KDtype(), VDtype());
}

std::string KvConfig::DtypeName() const {
  if (KDtype() == VDtype()) return DTypeName(KDtype());
  return std::string("K ") + DTypeName(KDtype()) + ", V " + DTypeName(VDtype());
}

int64_t KvConfig::TotalBytes() const {
  if (window_group_layers <= 0) return BytesPerBlock() * num_blocks;
  const int64_t layer_block = BytesPerBlock() / num_layers;  // one layer's K and V
  return layer_block * ((int64_t)(num_layers - window_group_layers) * num_blocks +
                        (int64_t)window_group_layers * window_group_blocks);
}

KvConfig SplitKvForWindow(KvConfig cfg, int32_t windowed_layers, int32_t window,
                          int32_t chunk_tokens, int32_t max_num_seqs) {
  const int32_t lw = windowed_layers, lf = cfg.num_layers - windowed_layers;
  if (lw <= 0 || lf <= 0 || window <= 0) return cfg;
  const int64_t bs = cfg.block_size;
  const int64_t seq_blocks = cfg.BlocksForTokens(cfg.max_model_len);          // full group
  const int64_t decode_blocks = std::min<int64_t>(seq_blocks, (window - 1) / bs + 2);
  // A window as long as a sequence releases nothing: one group.
  if (decode_blocks >= seq_blocks) return cfg;
  const int64_t chunk_blocks = std::min<int64_t>(seq_blocks, (std::max(chunk_tokens, 1) + bs - 1) / bs);
  // The budget in blocks of one layer.
  const int64_t units = cfg.num_blocks * cfg.num_layers;
  const double seqs = std::min<double>(
      max_num_seqs, (double)(units - lw * chunk_blocks) / (double)(lf * seq_blocks + lw * decode_blocks));
  int64_t window_blocks = 0, full_blocks = 0;
  if (seqs < 1) {
    // One sequence, as the unsplit cache held: its windowed blocks at
    // most one full sequence's.
    window_blocks = std::min(seq_blocks, decode_blocks + chunk_blocks);
    full_blocks = (units - lw * window_blocks) / lf;
  } else {
    window_blocks = std::min((int64_t)(seqs * (double)decode_blocks) + chunk_blocks,
                             (int64_t)(seqs * (double)seq_blocks));
    full_blocks = seqs >= max_num_seqs ? (int64_t)max_num_seqs * seq_blocks
                                       : (units - lw * window_blocks) / lf;
  }
  cfg.num_blocks = std::min<int64_t>(full_blocks, INT32_MAX);
  cfg.window_group_layers = lw;
  cfg.window_group_blocks = std::min<int64_t>(window_blocks, INT32_MAX);
  return cfg;
}

int64_t KvConfig::MaxConcurrency() const {
  if (max_model_len <= 0) return 0;
  return num_blocks / BlocksForTokens(max_model_len);
}

std::string KvConfig::Summary() const {
  char buf[256];
  std::string group;
  if (window_group_layers > 0) {
    group = "; windowed layers: " + std::to_string(window_group_blocks) + " blocks of their own";
  }
  std::snprintf(buf, sizeof(buf),
                "KV cache: %" PRId64 " blocks = %" PRId64
                " tokens (%s, %s%s); max concurrency at max_model_len %d = %" PRId64,
                num_blocks, num_tokens(), Gib((double)TotalBytes()).c_str(),
                DtypeName().c_str(), group.c_str(), max_model_len, MaxConcurrency());
  return buf;
}

std::optional<int64_t> ReadMemAvailableBytes() {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("MemAvailable:", 0) != 0) continue;
    std::istringstream ss(line.substr(13));
    int64_t kib = 0;
    if (ss >> kib) return kib * 1024;
  }
  return std::nullopt;
}

StatusOr<KvConfig> PlanKvCache(KvConfig cfg, const KvBudget& budget) {
  if (cfg.block_size <= 0 || cfg.block_size > 1024) {
    return InvalidArgument("block size must be in [1, 1024], got " +
                           std::to_string(cfg.block_size));
  }
  if (budget.max_num_seqs <= 0) {
    return InvalidArgument("max_num_seqs must be positive, got " +
                           std::to_string(budget.max_num_seqs));
  }
  if (budget.max_model_len < 0) {
    return InvalidArgument("max_model_len must be >= 0, got " +
                           std::to_string(budget.max_model_len));
  }
  const int64_t bytes_per_block = cfg.BytesPerBlock();
  if (bytes_per_block <= 0) return InvalidArgument("KV shape has zero bytes per block");

  int64_t budget_bytes = budget.kv_cache_memory_bytes;
  std::string source;
  if (budget_bytes > 0) {
    source = "--kv-cache-memory " + Gib((double)budget_bytes);
  } else {
    if (budget.memory_utilization <= 0 || budget.memory_utilization > 1) {
      return InvalidArgument("memory utilization must be in (0, 1], got " +
                             std::to_string(budget.memory_utilization));
    }
    int64_t available = budget.mem_available_bytes;
    if (available < 0) {
      std::optional<int64_t> read = ReadMemAvailableBytes();
      if (!read) {
        return Unavailable("cannot read MemAvailable from /proc/meminfo; pass --kv-cache-memory");
      }
      available = *read;
    }
    const int64_t free_bytes = std::max<int64_t>(0, available - budget.weight_bytes);
    budget_bytes = (int64_t)(budget.memory_utilization * (double)free_bytes);
    char buf[160];
    std::snprintf(buf, sizeof(buf), "--memory-utilization %.2f of %s free after %s of weights",
                  budget.memory_utilization, Gib((double)available).c_str(),
                  Gib((double)budget.weight_bytes).c_str());
    source = buf;
  }
  const int64_t budget_blocks = budget_bytes / bytes_per_block;
  const int64_t budget_tokens = budget_blocks * cfg.block_size;

  int32_t max_model_len = budget.max_model_len;
  if (max_model_len == 0) {
    max_model_len = budget.model_context_len > 0 ? budget.model_context_len : 2048;
    // "0 = model context capped by memory": shrink to what fits.
    max_model_len = (int32_t)std::min<int64_t>(max_model_len, budget_tokens);
  }
  if (max_model_len <= 0 || budget_tokens < max_model_len) {
    const int32_t wanted = budget.max_model_len > 0 ? budget.max_model_len
                                                    : std::max(budget.model_context_len, 1);
    return ResourceExhausted(
        "KV cache budget " + Gib((double)budget_bytes) + " (" + source + ") holds " +
        std::to_string(budget_blocks) + " blocks of " + std::to_string(cfg.block_size) +
        " tokens = " + std::to_string(budget_tokens) + " tokens at " +
        std::to_string(cfg.BytesPerToken()) + " bytes/token, fewer than one sequence of max_model_len " +
        std::to_string(wanted) + " (needs " + Gib((double)cfg.BytesPerToken() * wanted) +
        "); raise --kv-cache-memory or lower --max-model-len");
  }
  cfg.max_model_len = max_model_len;
  const int64_t cap_blocks = (int64_t)budget.max_num_seqs * cfg.BlocksForTokens(max_model_len);
  cfg.num_blocks = std::min(budget_blocks, cap_blocks);
  if (cfg.num_blocks > INT32_MAX) cfg.num_blocks = INT32_MAX;
  return cfg;
}

}  // namespace tern
