#include "tools/text_run.h"

#include <cstdio>
#include <utility>

#include "tokenizer/tokenizer.h"

namespace tern {

void AddTextRunFlags(ArgParser& p, TextRunFlags* f, const std::string& file_help) {
  p.AddString("-f,--file", "PATH", &f->text_file, file_help);
  p.AddInt("-c,--ctx", "N", &f->ctx, "window length in tokens (default 512)");
  p.AddInt("--chunks", "N", &f->max_chunks, "evaluate at most N windows (default: all)");
}

Status CheckTextRunFlags(const TextRunFlags& f, const std::string& what) {
  if (f.text_file.empty()) return InvalidArgument("no " + what + " given: pass a file with -f TEXT");
  if (f.ctx < 4 || f.ctx > (1 << 20)) return InvalidArgument("--ctx must be in [4, 1048576]");
  if (f.max_chunks < 0) return InvalidArgument("--chunks must be >= 0");
  return Status::Ok();
}

StatusOr<PerplexityRun> PrepareTextRun(const char* tool, Model& model,
                                       const std::string& text_file,
                                       PerplexityOptions& options, int64_t threads,
                                       int64_t max_chunks) {
  TERN_ASSIGN_OR_RETURN(Vocab vocab, Vocab::FromGguf(model.file()));
  TERN_ASSIGN_OR_RETURN(std::unique_ptr<Tokenizer> tokenizer, Tokenizer::Create(std::move(vocab)));
  options.bos_id = tokenizer->add_bos() ? tokenizer->bos_id() : -1;
  auto encode = [&](const std::string& text) { return tokenizer->Encode(text, true, false); };
  TERN_ASSIGN_OR_RETURN(PerplexityRun run, PreparePerplexityRun(model, text_file, encode, options,
                                                                (int)threads, max_chunks));
  std::fprintf(stderr, "%s: %zu tokens, %d chunks of %d tokens, %d threads\n", tool,
               run.num_tokens, run.num_chunks, options.ctx, run.threads);
  return run;
}

}  // namespace tern
