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

void AddThreadsFlag(ArgParser& parser, int* threads) {
  parser.AddInt("-t,--threads", "N", threads, "compute threads (default: physical cores)");
}

void AddThreadsFlag(ArgParser& parser, int64_t* threads) {
  parser.AddInt("-t,--threads", "N", threads, "compute threads (default: physical cores)");
}

}  // namespace tern
