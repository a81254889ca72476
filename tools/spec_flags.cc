#include "tools/spec_flags.h"

namespace tern {

void AddSpecFlags(ArgParser& parser, SpecFlags* f) {
  parser.AddString("--speculative-method", "NAME", &f->method,
                   "speculative decoding: draft (proposals from --speculative-model) or ngram "
                   "(prompt lookup in the request's own tokens) (default off; draft when "
                   "--speculative-model is given)");
  parser.AddString("--speculative-model", "FILE", &f->model,
                   "draft model GGUF for speculative decoding (same vocabulary as the model)");
  parser.AddInt("--num-speculative-tokens", "K", &f->num_tokens,
                "proposals verified per decode step, 1..64 (default 4 with speculation)");
  parser.AddInt("--ngram-max", "N", &f->ngram_max,
                "ngram: longest n-gram looked up (default 4)");
  parser.AddInt("--ngram-min", "M", &f->ngram_min,
                "ngram: shortest n-gram looked up (default 1)");
  parser.AddString("--speculative-adaptive", "on|off", &f->adaptive,
                   "on: each request's k follows its measured acceptance (down to 0 = off) and "
                   "speculation pauses while the batch is compute-bound; off: a fixed k "
                   "(default on)");
}

Status SpecFlags::Apply(EngineConfig* c) const {
  SpecMethod m = SpecMethod::kNone;
  if (method == "draft") {
    m = SpecMethod::kDraft;
  } else if (method == "ngram") {
    m = SpecMethod::kNgram;
  } else if (method.empty()) {
    if (!model.empty()) m = SpecMethod::kDraft;
  } else {
    return InvalidArgument("--speculative-method must be draft or ngram, got '" + method + "'");
  }
  if (m == SpecMethod::kDraft && model.empty()) {
    return InvalidArgument("--speculative-method draft needs --speculative-model DRAFT.gguf");
  }
  if (m == SpecMethod::kNgram && !model.empty()) {
    return InvalidArgument("--speculative-model is for --speculative-method draft, not ngram");
  }
  if (m != SpecMethod::kNgram && (ngram_max >= 0 || ngram_min >= 0)) {
    return InvalidArgument("--ngram-max/--ngram-min need --speculative-method ngram");
  }
  if (m == SpecMethod::kNone && num_tokens >= 0) {
    return InvalidArgument(
        "--num-speculative-tokens needs --speculative-model DRAFT.gguf or --speculative-method ngram");
  }
  if (adaptive != "on" && adaptive != "off") {
    return InvalidArgument("--speculative-adaptive must be on or off, got '" + adaptive + "'");
  }
  c->speculative_method = m;
  c->speculative_model = model;
  c->speculative_adaptive = adaptive == "on";
  if (m == SpecMethod::kNone) return Status::Ok();
  const int64_t k = num_tokens >= 0 ? num_tokens : 4;
  if (k < 1 || k > kMaxSpeculativeTokens) {
    return InvalidArgument("--num-speculative-tokens must be in [1, " +
                           std::to_string(kMaxSpeculativeTokens) + "], got " + std::to_string(k));
  }
  c->num_speculative_tokens = (int32_t)k;
  if (m == SpecMethod::kNgram) {
    const int64_t hi = ngram_max >= 0 ? ngram_max : 4;
    const int64_t lo = ngram_min >= 0 ? ngram_min : 1;
    if (lo < 1 || hi < lo || hi > 1024) {
      return InvalidArgument("--ngram-min/--ngram-max must satisfy 1 <= min <= max <= 1024, got min " +
                             std::to_string(lo) + ", max " + std::to_string(hi));
    }
    c->ngram_max = (int32_t)hi;
    c->ngram_min = (int32_t)lo;
  }
  return Status::Ok();
}

}  // namespace tern
