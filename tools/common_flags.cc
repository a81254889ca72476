#include "tools/common_flags.h"

#include "tools/hf_flag.h"

namespace tern {

void AddModelFlag(ArgParser& parser, std::string* path, const std::string& help) {
  parser.AddString("-m,--model", "PATH", path, help);
  // `tern serve model.gguf`: a lone argument is the model, unless the
  // command takes positionals of its own (SetPositional wins).
  parser.SetLonePositionalFlag("-m");
  AddHfRepoFlag(parser, path);
}

namespace {

template <typename Int>
void AddThreads(ArgParser& parser, Int* threads) {
  parser.AddInt("-t,--threads", "N", threads, "compute threads (default: physical cores)");
  parser.AddCheck([threads]() -> Status {
    if (*threads < 0) return InvalidArgument("-t must be >= 0, got " + std::to_string(*threads));
    return Status::Ok();
  });
}

}  // namespace

void AddThreadsFlag(ArgParser& parser, int* threads) { AddThreads(parser, threads); }

void AddThreadsFlag(ArgParser& parser, int64_t* threads) { AddThreads(parser, threads); }

}  // namespace tern
