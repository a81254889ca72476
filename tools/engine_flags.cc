#include "tools/engine_flags.h"

#include "tools/common_flags.h"
#include "tools/kv_eviction_flags.h"

namespace tern {

void AddEngineFlags(ArgParser& parser, EngineFlags* f) {
  EngineConfig& c = f->config;
  AddModelFlag(parser, &c.model_path, "GGUF model file (required)");
  AddThreadsFlag(parser, &c.num_threads);
  parser.AddInt("--max-num-seqs", "N", &c.max_num_seqs,
                "most requests running at once (default 64)");
  parser.AddInt("--max-model-len", "N", &c.max_model_len,
                "longest prompt + output in tokens (default: the model's context, capped by KV memory)");
  parser.AddInt("--max-num-batched-tokens", "N", &c.max_num_batched_tokens,
                "tokens computed per step, all requests together (default 512)");
  parser.AddInt("--block-size", "N", &c.block_size, "token slots per KV block (default 16)");
  parser.AddString("--kv-cache-memory", "SIZE", &f->kv_cache_memory,
                   "KV cache size, e.g. 2GiB (default: --memory-utilization of free memory)");
  parser.AddDouble("--memory-utilization", "F", &c.memory_utilization,
                   "fraction of free memory after the weights for the KV cache (default 0.9)");
  AddKvDtypeFlags(parser, &f->kv_dtypes, defaults::kKvCacheDtype);
  parser.AddFlag("--enable-chunked-prefill", &f->chunked_prefill,
                 "split long prompts across steps (default on)");
  parser.AddFlag("--no-enable-chunked-prefill", &f->no_chunked_prefill,
                 "schedule each prompt whole (the step budget grows to --max-model-len)");
  parser.AddInt("--max-num-partial-prefills", "N", &c.max_num_partial_prefills,
                "requests whose prompt is chunked at once (default 1)");
  parser.AddString("--scheduling-policy", "NAME", &f->scheduling_policy,
                   "how prompts share a step with decodes: goodput (decodes first, then "
                   "prompt tokens, shortest prompt first, up to --target-itl-ms by a step-cost "
                   "model fitted to this machine) or decode-protect (max(decoding requests, 8) "
                   "prompt tokens per step) (default goodput)");
  parser.AddDouble("--target-itl-ms", "MS", &c.target_itl_ms,
                   "goodput: step-time target while requests decode, i.e. their inter-token "
                   "latency (default 0 = auto: --target-itl-factor x the predicted decode-only "
                   "step)");
  parser.AddDouble("--target-itl-factor", "F", &c.target_itl_factor,
                   "goodput: the automatic target as a multiple of the decode-only step "
                   "(default 2.0)");
  parser.AddInt("--max-prefill-tokens-while-decoding", "N",
                &c.max_prefill_tokens_while_decoding,
                "prompt tokens per step while requests decode. decode-protect: a prompt "
                "token at position p counts 1 + p/512 (default 0 = auto: max(decoding "
                "requests, 8); a value >= --max-num-batched-tokens turns it off); goodput: "
                "an extra cap on top of the time target (default 0 = none)");
  parser.AddFlag("--enable-prefix-caching", &f->prefix_caching,
                 "reuse the KV of shared prompt prefixes (default on)");
  parser.AddFlag("--no-enable-prefix-caching", &f->no_prefix_caching,
                 "disable the prefix cache");
  parser.AddString("--kv-eviction", "MODE", &f->kv_eviction,
                   "none, or streaming: a request whose KV would pass --max-model-len drops whole "
                   "blocks after its first --kv-sink-tokens (attention sinks), keeping at least "
                   "--kv-window recent tokens, keys re-rotated to their new positions; requests "
                   "never fail for length and report usage.evicted_tokens (default none)");
  parser.AddInt("--kv-sink-tokens", "S", &c.kv_sink_tokens,
                "with --kv-eviction streaming: first tokens always kept, rounded up to whole "
                "blocks (default 4; 0 = none)");
  parser.AddInt("--kv-window", "W", &c.kv_window_tokens,
                "with --kv-eviction streaming: recent tokens kept at an eviction (default: half "
                "of --max-model-len)");
  AddSpecFlags(parser, &f->spec);
  parser.AddString("--step-log", "FILE", &c.step_log_path,
                   "append one JSON line per engine step to FILE (docs/engine.md; default: "
                   "$TERN_STEP_LOG, else none)");
  parser.AddFlag("-v,--verbose", &c.verbose, "log a status line every 5 s; serve: and one access-log line per request "
                 "(default off)");
}

void ApplyEnvSettings(const EnvSettings& env, EngineConfig* config) {
  if (config->step_log_path.empty()) config->step_log_path = env.step_log_path;
  if (!env.kv_huge_pages) config->kv_huge_pages = false;  // no flag for it
}

StatusOr<EngineConfig> EngineFlags::ToConfig() const {
  EngineConfig c = config;
  ApplyEnvSettings(EnvSettings::FromProcess(), &c);
  if (c.model_path.empty()) return InvalidArgument("missing -m MODEL (or the model as the lone argument)");
  if (chunked_prefill && no_chunked_prefill) {
    return InvalidArgument("--enable-chunked-prefill and --no-enable-chunked-prefill both given");
  }
  if (prefix_caching && no_prefix_caching) {
    return InvalidArgument("--enable-prefix-caching and --no-enable-prefix-caching both given");
  }
  if (scheduling_policy == "goodput") {
    c.scheduling_policy = SchedulingPolicy::kGoodput;
  } else if (scheduling_policy == "decode-protect") {
    c.scheduling_policy = SchedulingPolicy::kDecodeProtect;
  } else {
    return InvalidArgument("--scheduling-policy must be goodput or decode-protect, got '" +
                           scheduling_policy + "'");
  }
  TERN_RETURN_IF_ERROR(CheckKvEvictionMode(kv_eviction));
  c.kv_eviction = kv_eviction == "streaming" ? KvEviction::kStreaming : KvEviction::kNone;
  c.enable_chunked_prefill = !no_chunked_prefill;
  c.enable_prefix_caching = !no_prefix_caching;
  if (!kv_cache_memory.empty()) {
    StatusOr<int64_t> bytes = ParseByteSize(kv_cache_memory);
    if (!bytes.ok()) return bytes.status().WithContext("--kv-cache-memory");
    if (*bytes <= 0) return InvalidArgument("--kv-cache-memory must be positive, got " + kv_cache_memory);
    c.kv_cache_memory_bytes = *bytes;
  }
  if (!(c.memory_utilization > 0 && c.memory_utilization <= 1)) {
    return InvalidArgument("--memory-utilization must be in (0, 1], got " +
                           std::to_string(c.memory_utilization));
  }
  TERN_RETURN_IF_ERROR(spec.Apply(&c));
  c.kv_cache_dtype = kv_dtypes.k_dtype;
  if (kv_dtypes.v_dtype != kv_dtypes.k_dtype) c.kv_cache_dtype_v = kv_dtypes.v_dtype;
  return c;
}

}  // namespace tern
