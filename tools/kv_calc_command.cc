// tern kv-calc: KV-cache capacity planner.
//
//   bytes per token    = 2 x layers x kv_heads x head_dim x bytes_per_elem
//                        (K and V of different types: each its own half;
//                        kv/kv_config.h KvBytesPerToken, the one formula)
//   bytes per sequence = bytes per token x seq_len
//   total              = bytes per sequence x batch
//
// With --memory: how many sequences of seq_len fit, and the longest length
// that fits batch sequences. With a sliding window (from the model, or
// --sliding-window [--windowed-layers]): also the windowed figure, where the
// windowed layers hold only their last W positions (WindowedKvBytes in
// model/model_config.h).
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <string>

#include "gguf/gguf_file.h"
#include "kv/kv_config.h"
#include "kv/kv_storage.h"
#include "model/model_config.h"
#include "tools/arg_parser.h"
#include "tools/commands.h"
#include "tools/common_flags.h"
#include "tools/kv_dtype_flags.h"

namespace tern {
namespace {

std::string Bytes(int64_t b) {
  return std::to_string(b) + " bytes = " + FormatBytes((double)b);
}

}  // namespace

int RunKvCalc(int argc, char** argv) {
  std::string model_path;
  int layers = 0, kv_heads = 0, head_dim = 0, window = 0, windowed_layers = -1;
  int64_t seq_len = 0, batch = 1;
  KvDtypeFlags kv_dtypes;
  std::string memory;
  ArgParser parser(
      "kv-calc [-m MODEL | --layers L --kv-heads H --head-dim D] [--seq-len N] [--batch B] "
      "[--kv-cache-dtype TYPE] [--kv-cache-dtype-k TYPE] [--kv-cache-dtype-v TYPE] "
      "[--memory SIZE]",
      "KV-cache capacity planner: bytes per token, per sequence and for a batch\n"
      "(2 x layers x kv_heads x head_dim x bytes per element), and with --memory how many\n"
      "sequences fit and the longest length that fits the batch.");
  AddModelFlag(parser, &model_path, "read the shape from a GGUF model");
  parser.AddInt("--layers", "L", &layers, "transformer layers");
  parser.AddInt("--kv-heads", "H", &kv_heads, "KV heads (GQA groups)");
  parser.AddInt("--head-dim", "D", &head_dim, "dimension of one head");
  parser.AddInt("--seq-len", "N", &seq_len,
                "tokens per sequence (default: the model's context, else 4096)");
  parser.AddInt("--batch", "B", &batch, "sequences at once (default 1)");
  AddKvDtypeFlags(parser, &kv_dtypes, "f16");
  parser.AddString("--memory", "SIZE", &memory, "memory for the KV cache, e.g. 16GiB");
  parser.AddInt("--sliding-window", "W", &window,
                "attention window of the windowed layers (default: the model's; 0 = none)");
  parser.AddInt("--windowed-layers", "N", &windowed_layers,
                "layers that use the window (default: the model's, else all layers)");
  if (int rc = ParseOrExit(parser, argc, argv, "kv-calc"); rc >= 0) return rc;

  auto fail = [](const std::string& msg) {
    std::fprintf(stderr, "tern kv-calc: %s\n", msg.c_str());
    return 1;
  };
  KvConfig kv;
  std::string name;
  int32_t context = 0;
  if (!model_path.empty()) {
    if (layers || kv_heads || head_dim) return fail("give -m or --layers/--kv-heads/--head-dim, not both");
    auto file = gguf::GgufFile::Open(model_path);
    if (!file.ok()) return fail(file.status().message());
    auto mc = ModelConfig::FromGguf(**file);
    if (!mc.ok()) return fail(mc.status().message());
    kv.num_layers = mc->n_layer;
    kv.num_kv_heads = mc->n_head_kv;
    kv.head_dim = mc->head_dim;
    context = mc->n_ctx_train;
    if (window == 0) window = mc->sliding_window;
    if (windowed_layers < 0 && mc->sliding_window > 0) windowed_layers = mc->NumWindowedLayers();
    name = mc->name.empty() ? model_path : mc->name;
  } else {
    if (layers <= 0 || kv_heads <= 0 || head_dim <= 0) {
      return fail("give -m MODEL, or --layers, --kv-heads and --head-dim (all positive)");
    }
    kv.num_layers = layers;
    kv.num_kv_heads = kv_heads;
    kv.head_dim = head_dim;
  }
  if (seq_len == 0) seq_len = context > 0 ? context : 4096;
  if (seq_len < 0) return fail("--seq-len must be positive");
  if (batch <= 0) return fail("--batch must be positive");
  if (window < 0) return fail("--sliding-window must not be negative");
  if (windowed_layers < 0) windowed_layers = window > 0 ? kv.num_layers : 0;
  if (windowed_layers > kv.num_layers) {
    return fail("--windowed-layers " + std::to_string(windowed_layers) + " exceeds the " +
                std::to_string(kv.num_layers) + " layers");
  }
  kv.dtype = kv_dtypes.k_dtype;
  kv.v_dtype = kv_dtypes.v_dtype;
  for (DType t : {kv.KDtype(), kv.VDtype()}) {
    if (Status st = CheckKvRow(t, kv.num_kv_heads, kv.head_dim); !st.ok()) {
      return fail(st.message());
    }
  }

  const int64_t per_token = kv.BytesPerToken();
  const int64_t per_seq = per_token * seq_len;
  const int64_t total = per_seq * batch;
  if (!name.empty()) std::printf("model:        %s\n", name.c_str());
  if (kv.KDtype() == kv.VDtype()) {
    std::printf("shape:        %d layers x %d KV heads x head_dim %d, %s (%g bytes/element)\n",
                kv.num_layers, kv.num_kv_heads, kv.head_dim, kv_dtypes.Name().c_str(),
                KvBytesPerElement(kv.dtype));
  } else {
    std::printf("shape:        %d layers x %d KV heads x head_dim %d, %s (%g + %g bytes/element)\n",
                kv.num_layers, kv.num_kv_heads, kv.head_dim, kv_dtypes.Name().c_str(),
                KvBytesPerElement(kv.KDtype()), KvBytesPerElement(kv.VDtype()));
  }
  std::printf("per token:    %s\n", Bytes(per_token).c_str());
  std::printf("per sequence: %s (%" PRId64 " tokens)\n", Bytes(per_seq).c_str(), seq_len);
  std::printf("total:        %s (batch %" PRId64 ")\n", Bytes(total).c_str(), batch);
  if (window > 0 && windowed_layers > 0) {
    const int64_t windowed_seq =
        WindowedKvBytes(per_token, kv.num_layers, windowed_layers, window, seq_len);
    std::printf("windowed:     %s per sequence, %s in all (%d of %d layers keep only the last %d "
                "positions; naive figures above)\n",
                Bytes(windowed_seq).c_str(), FormatBytes((double)windowed_seq * batch).c_str(),
                windowed_layers, kv.num_layers, window);
    std::printf("tern holds:   %s\n",
                windowed_layers == kv.num_layers
                    ? "the windowed figure (every layer is windowed: blocks outside the window "
                      "return to the pool while a sequence runs)"
                    : "the windowed figure (the windowed layers have their own blocks, which "
                      "return to their pool outside the window; the global layers keep every "
                      "position; see docs/engine.md)");
  }
  if (!memory.empty()) {
    StatusOr<int64_t> mem = ParseByteSize(memory);
    if (!mem.ok()) return fail("--memory: " + mem.status().message());
    if (*mem <= 0) return fail("--memory must be positive");
    const int64_t fit_seqs = *mem / per_seq;
    const int64_t fit_len = *mem / (per_token * batch);
    std::printf("in %s:  %" PRId64 " sequences of %" PRId64 " tokens fit (%" PRId64
                " tokens in all)\n",
                FormatBytes((double)*mem).c_str(), fit_seqs, seq_len, *mem / per_token);
    std::printf("longest length for batch %" PRId64 ": %" PRId64 " tokens\n", batch, fit_len);
  }
  return 0;
}

}  // namespace tern
