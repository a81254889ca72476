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

namespace tern {

// options.bos_id is set from the tokenizer; threads <= 0: physical cores;
// max_chunks <= 0: every window. Errors name the file or the vocabulary.
StatusOr<PerplexityRun> PrepareTextRun(const char* tool, Model& model,
                                       const std::string& text_file,
                                       PerplexityOptions& options, int64_t threads,
                                       int64_t max_chunks);

}  // namespace tern
