// tern eval-quant: a regression check of a quantized model against its base.
// Both run the same text through PerplexityEvaluator (model/perplexity.h,
// llama.cpp's perplexity convention), window by window; their scored
// log-softmax rows are compared with CompareLogprobs (model/logprob_file.h):
// KL(base || quant) mean and p99, top-1 agreement. Also reports both
// perplexities and the file size ratio.
//
// KV cache: with --kv-cache-dtype[-k|-v] X the quantized side runs with an
// X cache and the base side with an f16 cache, and -q defaults to -m: the
// same weights, so the figures measure the cache alone. Without them both
// sides use an f32 cache (the weights alone).
//
// Memory: both runs keep every scored log-prob row until the end
// (positions x n_vocab floats each); limit long texts with --chunks.
//
// Cheap checks first: the three files are checked readable before a model
// loads, and both tokenizations compared before any window runs.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "base/file_checks.h"
#include "base/progress.h"
#include "base/thread_pool.h"
#include "model/logprob_file.h"
#include "model/model.h"
#include "model/perplexity.h"
#include "tokenizer/tokenizer.h"
#include "tools/arg_parser.h"
#include "tools/commands.h"
#include "tools/common_flags.h"
#include "tools/kv_dtype_flags.h"
#include "tools/text_run.h"

namespace tern {
namespace {

int Fail(const std::string& message) {
  std::fprintf(stderr, "tern eval-quant: %s\n", message.c_str());
  return 1;
}

struct EvalArgs {
  std::string base;
  std::string quant;
  TextRunFlags text;  // -f, -c, --chunks, -t
  bool json = false;
  KvDtypeFlags kv;  // the quantized side's cache (given: the base's is f16)
};

StatusOr<std::string> ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound(path + ": cannot open text file");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A loaded model with its tokenizer and the text's tokens.
struct Side {
  std::unique_ptr<Model> model;
  std::unique_ptr<Tokenizer> tokenizer;
  std::vector<int32_t> tokens;
  uint64_t file_bytes = 0;
};

StatusOr<Side> LoadSide(const std::string& path, const std::string& text) {
  Side side;
  TERN_ASSIGN_OR_RETURN(side.model, Model::Load(path));
  TERN_ASSIGN_OR_RETURN(Vocab vocab, Vocab::FromGguf(side.model->file()));
  TERN_ASSIGN_OR_RETURN(side.tokenizer, Tokenizer::Create(std::move(vocab)));
  side.tokens = side.tokenizer->Encode(text, true, false);
  side.file_bytes = side.model->file().file_size();
  return side;
}

Status CheckComparable(const EvalArgs& a, const Side& base, const Side& quant) {
  const int32_t vb = base.model->config().n_vocab, vq = quant.model->config().n_vocab;
  if (vb != vq) {
    return InvalidArgument(a.quant + " has a vocabulary of " + std::to_string(vq) + " tokens, " +
                           a.base + " of " + std::to_string(vb) + ": not the same model");
  }
  if (base.tokens != quant.tokens) {
    return InvalidArgument(a.quant + " tokenizes " + a.text.text_file + " differently from " + a.base +
                           ": not the same model");
  }
  return Status::Ok();
}

LogprobFile ToLogprobFile(const PerplexityEvaluator& ev, int32_t n_vocab, int32_t ctx) {
  LogprobFile f;
  f.n_vocab = n_vocab;
  f.ctx = ctx;
  f.token_ids = ev.scored_tokens();
  f.logprobs = ev.logprobs();
  return f;
}

struct Result {
  double ppl_base = 0, ppl_base_error = 0, ppl_quant = 0, ppl_quant_error = 0;
  KlStats kl;
  double size_ratio = 0;
  uint64_t base_bytes = 0, quant_bytes = 0;
  int32_t num_chunks = 0;
  int64_t num_scored = 0;
};

void PrintText(const EvalArgs& a, const Result& r) {
  std::printf("base:  %s (%s)  ppl = %.4f +/- %.5f\n", a.base.c_str(),
              FormatBytes((double)r.base_bytes).c_str(), r.ppl_base, r.ppl_base_error);
  std::printf("quant: %s (%s)  ppl = %.4f +/- %.5f\n", a.quant.c_str(),
              FormatBytes((double)r.quant_bytes).c_str(), r.ppl_quant, r.ppl_quant_error);
  std::printf("delta ppl = %+.4f\n", r.ppl_quant - r.ppl_base);
  std::printf("kl mean = %.6f  kl p99 = %.6f  kl max = %.6f\n", r.kl.mean_kl, r.kl.p99_kl,
              r.kl.max_kl);
  std::printf("top-1 agreement = %.2f%%\n", 100.0 * r.kl.top1_agreement);
  std::printf("size ratio = %.4f\n", r.size_ratio);
}

void PrintJson(const EvalArgs& a, const Result& r) {
  nlohmann::json j = {
      {"base", a.base},
      {"quant", a.quant},
      {"text", a.text.text_file},
      {"ctx", a.text.ctx},
      {"chunks", r.num_chunks},
      {"scored_positions", r.num_scored},
      {"ppl_base", r.ppl_base},
      {"ppl_quant", r.ppl_quant},
      {"delta_ppl", r.ppl_quant - r.ppl_base},
      {"kl_mean", r.kl.mean_kl},
      {"kl_p99", r.kl.p99_kl},
      {"kl_max", r.kl.max_kl},
      {"top1_agreement", r.kl.top1_agreement},
      {"base_bytes", r.base_bytes},
      {"quant_bytes", r.quant_bytes},
      {"size_ratio", r.size_ratio},
      {"kv_cache_dtype", a.kv.given ? a.kv.Name() : "f32"},
  };
  std::printf("%s\n", j.dump().c_str());
}

StatusOr<Result> Evaluate(const EvalArgs& a) {
  TERN_RETURN_IF_ERROR(CheckReadableFile(a.base, "base model"));
  TERN_RETURN_IF_ERROR(CheckReadableFile(a.quant, "quantized model"));
  TERN_ASSIGN_OR_RETURN(std::string text, ReadText(a.text.text_file));
  TERN_ASSIGN_OR_RETURN(Side base, LoadSide(a.base, text));
  TERN_ASSIGN_OR_RETURN(Side quant, LoadSide(a.quant, text));
  TERN_RETURN_IF_ERROR(CheckComparable(a, base, quant));

  PerplexityOptions options;
  options.ctx = (int32_t)a.text.ctx;
  options.batch = options.ctx;
  options.bos_id = base.tokenizer->add_bos() ? base.tokenizer->bos_id() : -1;
  options.keep_logprobs = true;
  PerplexityOptions quant_options = options;
  if (a.kv.given) {
    TERN_RETURN_IF_ERROR(CheckKvDtypesFit(a.kv, quant.model->config(), a.quant));
    options.kv_dtype = DType::kF16;
    quant_options.kv_dtype = a.kv.k_dtype;
    quant_options.kv_dtype_v = a.kv.v_dtype;
  }
  const int threads = a.text.threads > 0 ? (int)a.text.threads : ThreadPool::DefaultNumThreads();
  ThreadPool pool(threads);
  const size_t num_tokens = base.tokens.size();
  auto base_ev = PerplexityEvaluator::Create(*base.model, std::move(base.tokens), options, &pool);
  if (!base_ev.ok()) return InvalidArgument(a.text.text_file + ": " + base_ev.status().message());
  auto quant_ev =
      PerplexityEvaluator::Create(*quant.model, std::move(quant.tokens), quant_options, &pool);
  if (!quant_ev.ok()) return InvalidArgument(a.text.text_file + ": " + quant_ev.status().message());
  const int32_t total = (*base_ev)->num_chunks();
  const int32_t num_chunks =
      a.text.max_chunks > 0 ? std::min<int32_t>((int32_t)a.text.max_chunks, total) : total;
  std::fprintf(stderr, "eval-quant: %zu tokens, %d chunks of %d tokens, %d threads, KV cache %s\n",
               num_tokens, num_chunks, options.ctx, threads,
               a.kv.given ? ("base f16, quant " + a.kv.Name()).c_str() : "f32");
  Progress progress("eval-quant", "chunks", num_chunks);
  auto detail = [&] {
    char text[64];
    std::snprintf(text, sizeof text, "ppl base %.4f, quant %.4f", (*base_ev)->Perplexity(),
                  (*quant_ev)->Perplexity());
    return std::string(text);
  };
  while ((*base_ev)->chunks_done() < num_chunks) {
    TERN_RETURN_IF_ERROR((*base_ev)->RunNextChunk());
    TERN_RETURN_IF_ERROR((*quant_ev)->RunNextChunk());
    progress.Update((*base_ev)->chunks_done(), detail());
  }
  progress.Finish(detail());

  Result r;
  const int32_t n_vocab = base.model->config().n_vocab;
  TERN_ASSIGN_OR_RETURN(r.kl, CompareLogprobs(ToLogprobFile(**base_ev, n_vocab, options.ctx),
                                              ToLogprobFile(**quant_ev, n_vocab, options.ctx)));
  r.ppl_base = (*base_ev)->Perplexity();
  r.ppl_base_error = (*base_ev)->PerplexityError();
  r.ppl_quant = (*quant_ev)->Perplexity();
  r.ppl_quant_error = (*quant_ev)->PerplexityError();
  r.base_bytes = base.file_bytes;
  r.quant_bytes = quant.file_bytes;
  r.size_ratio = base.file_bytes > 0 ? (double)quant.file_bytes / (double)base.file_bytes : 0.0;
  r.num_chunks = num_chunks;
  r.num_scored = (*base_ev)->num_scored();
  return r;
}

}  // namespace

int RunEvalQuant(int argc, char** argv) {
  EvalArgs a;
  ArgParser p("eval-quant -m BASE.gguf -q QUANT.gguf -f TEXT [--ctx N] [--chunks N] [--json]\n"
              "       eval-quant -m MODEL.gguf --kv-cache-dtype TYPE -f TEXT [...]",
              "Regression check of a quantized model against its base on the same text "
              "(perplexity windows as 'tern perplexity'): both perplexities, delta ppl, mean "
              "and p99 KL(base || quant) of the next-token distributions, top-1 agreement and "
              "the file size ratio quant / base. With --kv-cache-dtype (-k/-v) the quantized "
              "side runs with that KV cache and the base side with an f16 cache; -q then "
              "defaults to -m (the cache alone is measured).");
  AddModelFlag(p, &a.base, "base GGUF model (required)");
  p.AddString("-q,--quant", "PATH", &a.quant,
              "quantized GGUF model (required; with --kv-cache-dtype default: -m)");
  AddTextRunFlags(p, &a.text, "text file (required)");
  AddThreadsFlag(p, &a.text.threads);
  AddKvDtypeFlags(p, &a.kv, "f32");
  p.AddFlag("--json", &a.json,
            "print one JSON object (ppl_base, ppl_quant, delta_ppl, kl_mean, kl_p99, "
            "top1_agreement, size_ratio, ...) instead of text");
  if (int rc = ParseOrExit(p, argc, argv, "eval-quant"); rc >= 0) return rc;
  if (a.base.empty()) return Fail("no base model given: pass one with -m BASE.gguf");
  if (a.quant.empty() && a.kv.given) a.quant = a.base;
  if (a.quant.empty()) return Fail("no quantized model given: pass one with -q QUANT.gguf");
  if (Status st = CheckTextRunFlags(a.text, "text"); !st.ok()) return Fail(st.message());

  StatusOr<Result> r = Evaluate(a);
  if (!r.ok()) return Fail(r.status().message());
  if (a.json) {
    PrintJson(a, *r);
  } else {
    PrintText(a, *r);
  }
  return 0;
}

}  // namespace tern
