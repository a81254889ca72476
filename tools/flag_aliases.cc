#include "tools/flag_aliases.h"

namespace tern {
namespace {

constexpr const char* kCpuOnly = "tern runs on the CPU; this flag has no effect here";

constexpr FlagAlias kAliases[] = {
    // Sampling.
    {"--temperature", AliasKind::kSame, "--temp", false, ""},
    {"--temp", AliasKind::kSame, "--temperature", false, ""},
    {"--repetition-penalty", AliasKind::kSame, "--repeat-penalty", false, ""},
    {"--repeat-penalty", AliasKind::kSame, "--repetition-penalty", false, ""},
    {"-s", AliasKind::kSame, "--seed", false, ""},
    // Tokens to generate.
    {"--n-predict", AliasKind::kSame, "--max-tokens", false, ""},
    {"-n", AliasKind::kSame, "--max-tokens", false, ""},
    {"--max-tokens", AliasKind::kSame, "--n-predict", false, ""},
    {"--max-new-tokens", AliasKind::kSame, "--n-predict,--max-tokens", false, ""},
    // Context.
    {"--ctx-size", AliasKind::kSame, "--ctx", false, ""},
    {"--ctx-size", AliasKind::kSimilar, "--max-model-len", false,
     "the longest prompt + output of one request"},
    {"-c", AliasKind::kSimilar, "--max-model-len", false,
     "the longest prompt + output of one request"},
    {"--max-model-len", AliasKind::kSame, "--ctx", false, ""},
    // Engine.
    {"--parallel", AliasKind::kSimilar, "--max-num-seqs", false,
     "the most requests running at once; each gets up to --max-model-len tokens"},
    {"-np", AliasKind::kSimilar, "--max-num-seqs", false,
     "the most requests running at once; each gets up to --max-model-len tokens"},
    {"--batch-size", AliasKind::kSimilar, "--max-num-batched-tokens,--batch", false,
     "tokens computed per step"},
    {"--ubatch-size", AliasKind::kSimilar, "--max-num-batched-tokens", false,
     "tokens computed per step"},
    {"--cache-type-k", AliasKind::kSame, "--kv-cache-dtype-k", false, ""},
    {"--cache-type-v", AliasKind::kSame, "--kv-cache-dtype-v", false, ""},
    {"-ctk", AliasKind::kSame, "--kv-cache-dtype-k", false, ""},
    {"-ctv", AliasKind::kSame, "--kv-cache-dtype-v", false, ""},
    // Speculative decoding.
    {"--model-draft", AliasKind::kSame, "--speculative-model", false, ""},
    {"-md", AliasKind::kSame, "--speculative-model", false, ""},
    {"--draft-max", AliasKind::kSame, "--num-speculative-tokens", false, ""},
    {"--gpu-memory-utilization", AliasKind::kSimilar, "--memory-utilization", false,
     "the fraction of free memory after the weights given to the KV cache"},
    // GPU settings.
    {"-ngl", AliasKind::kNoEffect, "", true, kCpuOnly},
    {"--n-gpu-layers", AliasKind::kNoEffect, "", true, kCpuOnly},
    {"--gpu-layers", AliasKind::kNoEffect, "", true, kCpuOnly},
    {"-mg", AliasKind::kNoEffect, "", true, kCpuOnly},
    {"--main-gpu", AliasKind::kNoEffect, "", true, kCpuOnly},
    {"-ts", AliasKind::kNoEffect, "", true, kCpuOnly},
    {"--tensor-split", AliasKind::kNoEffect, "", true, kCpuOnly},
    {"-tp", AliasKind::kNoEffect, "", true, kCpuOnly},
    {"--tensor-parallel-size", AliasKind::kNoEffect, "", true, kCpuOnly},
};

}  // namespace

std::span<const FlagAlias> FlagAliases() { return kAliases; }

}  // namespace tern
