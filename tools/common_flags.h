// Flags that many commands share, registered in one place so that every
// command reads, validates and documents them the same way:
//   -m/--model  the GGUF file a command loads (or -hf/--hf-repo SPEC: the
//               same file fetched by name, tools/hf_flag.h);
//   -t/--threads compute threads.
// Both validate after parsing (ArgParser::AddCheck), so a command sees only
// a usable value.
#pragma once

#include <cstdint>
#include <string>

#include "tools/arg_parser.h"

namespace tern {

// Registers -m/--model PATH into *path. help says what the model is for and
// its default. A command without positionals of its own also takes the model
// as its lone argument (`tern serve model.gguf`); both at once is an error.
void AddModelFlag(ArgParser& parser, std::string* path, const std::string& help);

// Registers -t/--threads N (1-1024). *threads keeps its value (0) when the
// flag is absent; the command then picks its default,
// ThreadPool::DefaultNumThreads() (the cores available to the process).
// -t 0 or below is an error; above the available cores a one-line warning
// goes to stderr.
void AddThreadsFlag(ArgParser& parser, int* threads);
void AddThreadsFlag(ArgParser& parser, int64_t* threads);

}  // namespace tern
