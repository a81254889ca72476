// The set-up `tern perplexity` and `tern imatrix` share: the model's own
// tokenizer, BOS first when the tokenizer adds one, the text file tokenized
// into a PerplexityRun (pool + evaluator), and a one-line summary on stderr
// that names the tool.
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"
#include "model/model.h"
#include "model/perplexity.h"
#include "tools/arg_parser.h"

namespace tern {

// The flags of a run over a text file in windows, shared by perplexity,
// imatrix and eval-quant: -f/--file PATH, -c/--ctx N (window, 4..2^20,
// default 512), --chunks N (at most N windows; 0 = all), -t/--threads.
struct TextRunFlags {
  std::string text_file;
  int64_t ctx = 512;
  int64_t max_chunks = 0;
  int64_t threads = 0;
};

// Registers -f (file_help: what the file is), -c and --chunks; the caller
// places -t (AddThreadsFlag) where its help lists it.
void AddTextRunFlags(ArgParser& parser, TextRunFlags* flags, const std::string& file_help);
// A file given and the ranges above; `what` names the text in the error
// ("no calibration text given: pass a file with -f TEXT").
Status CheckTextRunFlags(const TextRunFlags& flags, const std::string& what);

// options.bos_id is set from the tokenizer; threads <= 0: physical cores;
// max_chunks <= 0: every window. Errors name the file or the vocabulary.
StatusOr<PerplexityRun> PrepareTextRun(const char* tool, Model& model,
                                       const std::string& text_file,
                                       PerplexityOptions& options, int64_t threads,
                                       int64_t max_chunks);

}  // namespace tern
