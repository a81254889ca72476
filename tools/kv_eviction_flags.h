// The streaming-KV flags of the commands that run one sequence (`tern
// generate` through the engine, `tern perplexity` through SequenceRunner),
// registered and checked in one place:
//   --kv-eviction none|streaming   (an unknown mode is named at parse time)
//   --kv-sink-tokens S             first tokens always kept (default 4)
//   --kv-window W                  recent tokens kept at an eviction
// The engine's (`generate` here, `serve` and `batch` with
// tools/engine_flags.h's flags) round the sinks up to whole KV blocks.
#pragma once

#include <cstdint>
#include <string>

#include "model/streaming_kv.h"
#include "tools/arg_parser.h"

namespace tern {

struct KvEvictionFlags {
  std::string mode = "none";  // --kv-eviction
  int64_t sink_tokens = 4;    // --kv-sink-tokens
  int64_t window = 0;         // --kv-window (0 = the command's default)

  bool streaming() const { return mode == "streaming"; }
  StreamingKvConfig ToConfig() const;
};

// Registers the three flags and the check of the mode. none_help and
// streaming_help say what each mode means for the command, window_default
// how --kv-window defaults.
void AddKvEvictionFlags(ArgParser& parser, KvEvictionFlags* flags, const std::string& none_help,
                        const std::string& streaming_help, const std::string& window_default);

// "none" or "streaming", else an error naming --kv-eviction (the engine's
// flags check the same names).
Status CheckKvEvictionMode(const std::string& mode);

}  // namespace tern
