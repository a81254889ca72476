// Engine flags shared by `tern batch` and `tern serve`: registers the
// EngineConfig options on an ArgParser and turns the parsed values into an
// EngineConfig (sizes like "2GiB", dtype names, the --no-* negations).
//
//   EngineFlags flags;
//   AddEngineFlags(parser, &flags);
//   ... ParseOrExit(parser, ...) ...
//   StatusOr<EngineConfig> config = flags.ToConfig();
#pragma once

#include <string>

#include "base/env_settings.h"
#include "base/status.h"
#include "engine/engine.h"
#include "sample/defaults.h"
#include "tools/arg_parser.h"
#include "tools/kv_dtype_flags.h"
#include "tools/spec_flags.h"

namespace tern {

struct EngineFlags {
  EngineConfig config;
  std::string kv_cache_memory;     // "" = use --memory-utilization
  KvDtypeFlags kv_dtypes;          // --kv-cache-dtype[-k|-v]
  bool chunked_prefill = false;     // --enable-chunked-prefill
  bool no_chunked_prefill = false;  // --no-enable-chunked-prefill
  bool prefix_caching = false;      // --enable-prefix-caching
  bool no_prefix_caching = false;   // --no-enable-prefix-caching
  std::string scheduling_policy = "goodput";
  std::string kv_eviction = "none";  // --kv-eviction
  SpecFlags spec;                   // --speculative-*, --ngram-*

  // Validates the raw values and fills config (errors name the flag).
  StatusOr<EngineConfig> ToConfig() const;
};

// Fills what the environment sets (base/env_settings.h) where no flag did:
// TERN_STEP_LOG -> step_log_path, TERN_KV_HUGEPAGES=0 -> kv_huge_pages false.
// ToConfig() calls it; so does every command that makes its EngineConfig by
// hand (chat, generate).
void ApplyEnvSettings(const EnvSettings& env, EngineConfig* config);

// Registers -m/--model, -t/--threads, -v/--verbose and the engine options.
void AddEngineFlags(ArgParser& parser, EngineFlags* flags);

}  // namespace tern
