// FlagAliases: spellings of flags that users bring from other tools
// (llama.cpp's CLI and server, vLLM, Hugging Face), and what ArgParser does
// with them when a command does not define the spelling itself:
//   kSame      the command's flag means the same thing: accepted as it;
//   kSimilar   a related but different flag: an error that points to it and
//              says how it differs (accepting it would change the meaning);
//   kNoEffect  a GPU setting: accepted with a warning, its value ignored
//              (tern runs on the CPU).
// An entry applies only when the command has one of its targets (the first it
// has wins), so the table is shared by every command. vLLM's underscore
// spellings (--max_model_len) need no entry: ArgParser reads '_' as '-'.
// docs/cli.md lists the table for users.
#pragma once

#include <span>

namespace tern {

enum class AliasKind { kSame, kSimilar, kNoEffect };

struct FlagAlias {
  const char* name;     // as other tools spell it: "--ctx-size", "-ngl"
  AliasKind kind;
  const char* targets;  // tern flags it stands for, comma-separated ("" for kNoEffect)
  bool takes_value;     // kNoEffect: whether to skip a value after it
  const char* note;     // kSimilar: how the target differs; kNoEffect: why
};

std::span<const FlagAlias> FlagAliases();

}  // namespace tern
