#include "tools/generation_flags.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <optional>

#include "gguf/gguf_file.h"
#include "model/model.h"
#include "sample/request_checks.h"
#include "server/chat_prompt.h"

namespace tern {
namespace {

std::string Num(double x) { return FormatNumber(x); }

// "FLAG must be WHAT, got VALUE".
Status OutOfRange(const std::string& flag, const std::string& what, const std::string& value) {
  return InvalidArgument(flag + " must be " + what + ", got " + value);
}

// The flag that sets each field of sample/request_checks.h.
std::string FlagName(const std::string& field) {
  static const std::pair<const char*, const char*> kFlags[] = {
      {"temperature", "--temp"},
      {"top_k", "--top-k"},
      {"top_p", "--top-p"},
      {"min_p", "--min-p"},
      {"repetition_penalty", "--repeat-penalty"},
      {"presence_penalty", "--presence-penalty"},
      {"frequency_penalty", "--frequency-penalty"},
      {"seed", "--seed"},
      {"stop", "--stop"}};
  for (const auto& [name, flag] : kFlags) {
    if (field == name) return flag;
  }
  return field;
}

// The request checks every front end shares (sample/request_checks.h).
Status CheckSampling(const GenerationFlags& f) {
  MaybeFieldError e = CheckSamplingRanges(f.ToSamplingParams());
  if (!e) e = CheckSeedFlag(f.seed);
  if (!e) e = CheckStopStrings(f.stop);
  if (e) return InvalidArgument(e->Text(FlagName(e->field)));
  return Status::Ok();
}

Status CheckLengths(const GenerationFlags& f) {
  if (f.max_tokens != -1 && (CheckMaxTokens(f.max_tokens) || f.max_tokens > INT32_MAX)) {
    return OutOfRange("-n", "a positive count, or -1 = until end of text or context",
                      std::to_string(f.max_tokens));
  }
  if (f.ctx != GenerationFlags::kUnset && (f.ctx < 1 || f.ctx > INT32_MAX))
    return OutOfRange("-c", "a positive token count", std::to_string(f.ctx));
  return Status::Ok();
}

}  // namespace

SamplingParams GenerationFlags::ToSamplingParams() const {
  SamplingParams p;
  p.temperature = (float)temperature;
  p.top_k = ClampToInt32(top_k);
  p.top_p = (float)top_p;
  p.min_p = (float)min_p;
  p.repetition_penalty = (float)repeat_penalty;
  p.presence_penalty = (float)presence_penalty;
  p.frequency_penalty = (float)frequency_penalty;
  p.has_seed = seed >= 0;
  p.seed = seed >= 0 ? (uint64_t)seed : 0;
  p.max_tokens = ClampToInt32(max_tokens);
  return p;
}

StatusOr<int32_t> GenerationFlags::ResolveContext(const ModelConfig& config,
                                                  const std::string& model_path) const {
  if (ctx == kUnset) {
    return config.n_ctx_train > 0 ? std::min(config.n_ctx_train, kCliMaxDefaultContext)
                                  : kCliMaxDefaultContext;
  }
  TERN_RETURN_IF_ERROR(CheckContextLength(config, ctx, "-c", model_path));
  return (int32_t)ctx;
}

StatusOr<int32_t> GenerationFlags::ResolveContext(const std::string& model_path) const {
  TERN_ASSIGN_OR_RETURN(std::unique_ptr<gguf::GgufFile> file, gguf::GgufFile::Open(model_path));
  TERN_ASSIGN_OR_RETURN(ModelConfig config, Model::ReadConfig(*file));
  return ResolveContext(config, model_path);
}

void AddGenerationFlags(ArgParser& p, GenerationFlags* f, const std::string& reply_noun) {
  p.AddInt("-n,--n-predict", "N", &f->max_tokens,
           "tokens to generate for " + reply_noun +
               " (default -1 = until end of text or context; 0 and other negatives are errors)");
  p.AddInt("-c,--ctx", "N", &f->ctx,
           "context size in tokens, prompt included (default: the model's trained context, at "
           "most " + std::to_string(kCliMaxDefaultContext) +
               "; more than the trained context is refused)");
  p.AddDouble("--temp", "T", &f->temperature,
              "temperature (default " + Num(defaults::kTemperature) + "; 0 = greedy)");
  p.AddInt("--top-k", "K", &f->top_k,
           "keep the K most likely tokens (default " + std::to_string(defaults::kTopK) +
               " = off)");
  p.AddDouble("--top-p", "P", &f->top_p,
              "nucleus sampling mass (default " + Num(defaults::kTopP) + " = off)");
  p.AddDouble("--min-p", "P", &f->min_p,
              "drop tokens below P x the best (default " + Num(defaults::kMinP) + " = off)");
  p.AddDouble("--repeat-penalty", "R", &f->repeat_penalty,
              "penalty on generated tokens (default " + Num(defaults::kRepetitionPenalty) +
                  " = off)");
  p.AddDouble("--presence-penalty", "X", &f->presence_penalty,
              "OpenAI presence penalty, -2..2 (default " + Num(defaults::kPresencePenalty) + ")");
  p.AddDouble("--frequency-penalty", "X", &f->frequency_penalty,
              "OpenAI frequency penalty, -2..2 (default " + Num(defaults::kFrequencyPenalty) +
                  ")");
  p.AddInt("--seed", "S", &f->seed, "sampling seed (default -1 = random, printed on stderr)");
  p.AddList("--stop", "STR", &f->stop,
            "stop before STR appears in the text; repeatable (default: none)");
  p.AddString("--chat-template", "FILE|NAME", &f->chat_template,
              "chat template file, or a built-in: " + BuiltinChatTemplateList() +
                  " (default: the model's tokenizer.chat_template)");
  p.AddString("--system", "TEXT", &f->system, "system message (default: none)");
  AddKvDtypeFlags(p, &f->kv, defaults::kKvCacheDtype);
  p.AddCheck([f] { return CheckSampling(*f); });
  p.AddCheck([f] { return CheckLengths(*f); });
}

std::string SamplingDefaultsHelp() {
  return "Sampling defaults follow OpenAI's API (temperature 1, no top-k, top-p 1, no min-p); "
         "--temp 0 is greedy. llama.cpp's habit is one set of flags away: --temp 0.8 --top-k 40 "
         "--top-p 0.95 --min-p 0.05.";
}

}  // namespace tern
