// `tern model synth`: writes a random-weight GGUF with the real shapes of a
// known model (for benchmarks and tests without downloading weights).
// Weights ~ N(0, 0.02) (norm weights 1), deterministic from --seed: each row
// has its own generator seeded from (seed, tensor, row), so the file does not
// depend on the number of threads. Tokenizer metadata is copied from a
// vocab-only GGUF, or synthesized (byte tokens + filler) when none matches.
#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/file_checks.h"
#include "base/paths.h"
#include "base/progress.h"
#include "base/status.h"
#include "base/thread_pool.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "quant/quant.h"
#include "spec/model_copy.h"
#include "tools/arg_parser.h"
#include "tools/commands.h"
#include "tools/common_flags.h"

namespace tern {
namespace {

using gguf::Value;
using gguf::ValueType;

struct Shape {
  std::string arch = "llama";
  int64_t n_embd = 0, n_layer = 0, n_head = 0, n_head_kv = 0, n_ff = 0, n_vocab = 0;
  int64_t ctx = 2048;
  double rope_base = 10000.0;
  double rms_eps = 1e-5;
  int64_t head_dim = 0;        // 0 = n_embd / n_head (else attention.key_length)
  int64_t sliding_window = 0;  // 0 = none (attention.sliding_window)
  bool tied = false;           // no output.weight
  std::string default_vocab;  // relative to ModelsDir(); "" = synthesize

  int64_t HeadDim() const { return head_dim > 0 ? head_dim : n_embd / n_head; }
};

std::optional<Shape> Preset(const std::string& name) {
  Shape s;
  if (name == "tinyllama-1.1b") {
    s.n_embd = 2048, s.n_layer = 22, s.n_head = 32, s.n_head_kv = 4, s.n_ff = 5632;
    s.n_vocab = 32000;
    s.default_vocab = "vocab/ggml-vocab-llama-spm.gguf";
  } else if (name == "stories110m") {
    s.n_embd = 768, s.n_layer = 12, s.n_head = 12, s.n_head_kv = 12, s.n_ff = 2048;
    s.n_vocab = 32000, s.ctx = 1024;
    s.default_vocab = "vocab/ggml-vocab-llama-spm.gguf";
  } else if (name == "llama-3.2-1b") {
    s.n_embd = 2048, s.n_layer = 16, s.n_head = 32, s.n_head_kv = 8, s.n_ff = 8192;
    s.n_vocab = 128256, s.rope_base = 500000.0, s.ctx = 8192;
  } else if (name == "qwen2-0.5b") {
    s.arch = "qwen2";
    s.n_embd = 896, s.n_layer = 24, s.n_head = 14, s.n_head_kv = 2, s.n_ff = 4864;
    s.n_vocab = 151936, s.rope_base = 1000000.0, s.rms_eps = 1e-6, s.ctx = 4096;
  } else if (name == "qwen3-0.6b") {
    s.arch = "qwen3";
    s.n_embd = 1024, s.n_layer = 28, s.n_head = 16, s.n_head_kv = 8, s.head_dim = 128;
    s.n_ff = 3072, s.n_vocab = 151936, s.rope_base = 1000000.0, s.rms_eps = 1e-6;
    s.ctx = 40960, s.tied = true;
  } else if (name == "gemma2-2b") {
    s.arch = "gemma2";
    s.n_embd = 2304, s.n_layer = 26, s.n_head = 8, s.n_head_kv = 4, s.head_dim = 256;
    s.n_ff = 9216, s.n_vocab = 256000, s.rms_eps = 1e-6, s.ctx = 8192;
    s.sliding_window = 4096, s.tied = true;
  } else if (name == "gemma3-1b") {
    s.arch = "gemma3";
    s.n_embd = 1152, s.n_layer = 26, s.n_head = 4, s.n_head_kv = 1, s.head_dim = 256;
    s.n_ff = 6912, s.n_vocab = 262144, s.rope_base = 1000000.0, s.rms_eps = 1e-6;
    s.ctx = 32768, s.sliding_window = 512, s.tied = true;
  } else if (name == "phi3-mini") {
    s.arch = "phi3";
    s.n_embd = 3072, s.n_layer = 32, s.n_head = 32, s.n_head_kv = 32, s.n_ff = 8192;
    s.n_vocab = 32064, s.ctx = 4096, s.sliding_window = 2047;
  } else if (name == "mistral-7b") {
    s.n_embd = 4096, s.n_layer = 32, s.n_head = 32, s.n_head_kv = 8, s.n_ff = 14336;
    s.n_vocab = 32000, s.ctx = 32768, s.sliding_window = 4096;
    s.default_vocab = "vocab/ggml-vocab-llama-spm.gguf";
  } else if (name == "qwen3-tiny" || name == "gemma2-tiny" || name == "gemma3-tiny" ||
             name == "phi3-tiny" || name == "mistral-tiny") {
    // Small versions of the families' shapes for tests (synthetic tokenizer;
    // gemma: head_dim * n_head != n_embd as in the real files; windows short
    // enough for tests to run past them).
    s.arch = name.substr(0, name.find('-'));
    if (s.arch == "mistral") s.arch = "llama";
    s.n_embd = 128, s.n_layer = 4, s.n_head = 4, s.n_head_kv = 2, s.n_ff = 256;
    s.n_vocab = 512, s.ctx = 1024;
    if (s.arch == "qwen3") s.head_dim = 64, s.tied = true, s.rope_base = 1000000.0;
    if (s.arch == "gemma2") s.head_dim = 64, s.tied = true, s.sliding_window = 16;
    if (s.arch == "gemma3") {
      s.head_dim = 64, s.tied = true, s.sliding_window = 16, s.n_layer = 6;
      s.rope_base = 1000000.0;
    }
    if (s.arch == "phi3") s.n_head_kv = 4, s.sliding_window = 512;
    if (s.arch == "llama") s.sliding_window = 64;
  } else if (name == "tiny") {
    s.n_embd = 256, s.n_layer = 4, s.n_head = 8, s.n_head_kv = 2, s.n_ff = 768;
    s.n_vocab = 512;
    s.default_vocab = "stories260K.gguf";
  } else {
    return std::nullopt;
  }
  return s;
}

// llama.cpp's general.file_type ids ("mostly X").
std::optional<uint32_t> FileType(DType t) {
  switch (t) {
    case DType::kF32: return 0;
    case DType::kF16: return 1;
    case DType::kQ4_0: return 2;
    case DType::kQ4_1: return 3;
    case DType::kQ8_0: return 7;
    case DType::kQ5_0: return 8;
    case DType::kQ5_1: return 9;
    case DType::kQ4_K: return 14;
    case DType::kQ5_K: return 16;
    case DType::kQ6_K: return 18;
    case DType::kBF16: return 32;
    default: return std::nullopt;
  }
}

uint64_t SplitMix(uint64_t& s) {
  uint64_t z = (s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Approximately normal values (sum of four uniforms, rescaled) with stddev
// sigma: fast, and a rounding error away from a Gaussian for our purposes.
void FillNormal(uint64_t seed, float sigma, float* out, int64_t n) {
  uint64_t s = seed;
  // Sum of 4 uniforms on [0, 65536): mean 131070, variance 4 * 65536^2 / 12.
  const float scale = sigma / (65536.0f * std::sqrt(4.0f / 12.0f));
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t r = SplitMix(s);
    const float sum = (float)(r & 0xFFFF) + (float)((r >> 16) & 0xFFFF) +
                      (float)((r >> 32) & 0xFFFF) + (float)(r >> 48);
    out[i] = (sum - 131070.0f) * scale;
  }
}

struct SynthOptions {
  std::string preset = "tiny";
  int64_t n_embd = 0, n_layer = 0, n_head = 0, n_head_kv = 0, n_ff = 0, n_vocab = 0, ctx = 0;
  int64_t head_dim = 0, sliding_window = 0;
  std::string type = "f16";
  int64_t seed = 1;
  std::string vocab_from;
  std::string out;
  int threads = 0;
};

class Synthesizer {
 public:
  Synthesizer(const Shape& shape, DType type, uint64_t seed, ThreadPool& pool)
      : shape_(shape), type_(type), seed_(seed), pool_(pool) {}

  gguf::GgufWriter& writer() { return writer_; }

  // A [rows, cols] weight matrix (ggml shape {cols, rows}) in the file type,
  // falling back to Q8_0/F16 when cols is not a multiple of the block size.
  Status AddMatrix(const std::string& name, int64_t rows, int64_t cols) {
    DType t = type_;
    if (cols % BlockSize(t) != 0) t = cols % 32 == 0 ? DType::kQ8_0 : DType::kF16;
    const int64_t row_bytes = RowBytes(t, cols);
    std::vector<uint8_t> data(rows * row_bytes);
    const uint64_t tensor_seed = NextTensorSeed();
    pool_.ParallelFor(rows, [&](int64_t r0, int64_t r1, int) {
      std::vector<float> row(cols);
      for (int64_t r = r0; r < r1; ++r) {
        uint64_t s = tensor_seed ^ (0xD1B54A32D192ED03ull * (uint64_t)(r + 1));
        FillNormal(SplitMix(s), 0.02f, row.data(), cols);
        quant::QuantizeRow(t, row.data(), data.data() + r * row_bytes, cols);
      }
    }, 16);
    bytes_ += data.size();
    return writer_.AddTensor(name, t, {cols, rows}, data.data(), data.size());
  }

  // A 1-D F32 vector: all ones (norms) or ~N(0, 0.02) (biases).
  Status AddVector(const std::string& name, int64_t n, bool ones) {
    std::vector<float> v(n, 1.0f);
    const uint64_t tensor_seed = NextTensorSeed();
    if (!ones) FillNormal(tensor_seed, 0.02f, v.data(), n);
    bytes_ += n * 4;
    return writer_.AddTensor(name, DType::kF32, {n}, v.data(), n * 4);
  }

  uint64_t bytes() const { return bytes_; }

 private:
  uint64_t NextTensorSeed() {
    uint64_t s = seed_ * 0x9E3779B97F4A7C15ull + (uint64_t)(++num_tensors_);
    return SplitMix(s);
  }

  Shape shape_;
  DType type_;
  uint64_t seed_;
  ThreadPool& pool_;
  gguf::GgufWriter writer_;
  uint64_t num_tensors_ = 0;
  uint64_t bytes_ = 0;
};

// Byte tokens + filler, SentencePiece-style metadata.
void SynthesizeTokenizer(gguf::GgufWriter& w, int64_t n_vocab, const std::string& arch) {
  std::vector<Value> tokens, scores, types;
  auto add = [&](const std::string& text, float score, int32_t type) {
    tokens.push_back(Value::String(text));
    scores.push_back(Value::Float32(score));
    types.push_back(Value::Int32(type));
  };
  add("<unk>", 0.0f, 2);
  add("<s>", 0.0f, 3);
  add("</s>", 0.0f, 3);
  for (int b = 0; b < 256 && (int64_t)tokens.size() < n_vocab; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    add(name, 0.0f, 6);
  }
  // phi3 files carry <|endoftext|> (tools key special tokens by it).
  const int64_t n_filler = arch == "phi3" ? n_vocab - 1 : n_vocab;
  for (int64_t i = (int64_t)tokens.size(); i < n_filler; ++i) {
    add("\xE2\x96\x81tok" + std::to_string(i), -(float)i, 1);
  }
  if (n_filler < n_vocab) add("<|endoftext|>", 0.0f, 3);
  w.SetValue("tokenizer.ggml.model", Value::String("llama"));
  w.SetValue("tokenizer.ggml.tokens", Value::Array(ValueType::kString, std::move(tokens)));
  w.SetValue("tokenizer.ggml.scores", Value::Array(ValueType::kFloat32, std::move(scores)));
  w.SetValue("tokenizer.ggml.token_type", Value::Array(ValueType::kInt32, std::move(types)));
  w.SetValue("tokenizer.ggml.bos_token_id", Value::Uint32(1));
  w.SetValue("tokenizer.ggml.eos_token_id", Value::Uint32(2));
  w.SetValue("tokenizer.ggml.unknown_token_id", Value::Uint32(0));
}

// Copies tokenizer.* keys from vocab_path; checks the vocabulary size.
Status CopyTokenizer(gguf::GgufWriter& w, const std::string& vocab_path, int64_t n_vocab) {
  std::unique_ptr<gguf::GgufFile> vocab;
  TERN_ASSIGN_OR_RETURN(vocab, gguf::GgufFile::Open(vocab_path));
  const gguf::Value* tokens = vocab->Find("tokenizer.ggml.tokens");
  if (tokens == nullptr || tokens->type != ValueType::kArray) {
    return InvalidArgument(vocab_path + ": no tokenizer.ggml.tokens array");
  }
  if ((int64_t)tokens->array.size() != n_vocab) {
    return InvalidArgument(vocab_path + " has " + std::to_string(tokens->array.size()) +
                           " tokens but the model wants n_vocab " + std::to_string(n_vocab) +
                           " (pass a matching --vocab-from, or omit it for a synthetic "
                           "tokenizer with --n-vocab)");
  }
  for (const auto& [key, value] : vocab->metadata()) {
    if (key.rfind("tokenizer.", 0) == 0) w.SetValue(key, value);
  }
  return Status::Ok();
}

Status Synthesize(const SynthOptions& o, const Shape& s, DType type, bool explicit_vocab) {
  const int threads = o.threads > 0 ? o.threads : ThreadPool::DefaultNumThreads();
  ThreadPool pool(threads);
  Synthesizer syn(s, type, (uint64_t)o.seed, pool);
  gguf::GgufWriter& w = syn.writer();
  const std::string& a = s.arch;
  const int64_t head_dim = s.HeadDim();
  const int64_t q_dim = head_dim * s.n_head;
  const int64_t kv_dim = head_dim * s.n_head_kv;
  const bool gemma = a == "gemma2" || a == "gemma3";
  w.SetValue("general.architecture", Value::String(a));
  w.SetValue("general.name", Value::String("synthetic " + o.preset + " " + DTypeName(type)));
  w.SetValue("general.file_type", Value::Uint32(*FileType(type)));
  w.SetValue(a + ".vocab_size", Value::Uint32((uint32_t)s.n_vocab));
  w.SetValue(a + ".context_length", Value::Uint32((uint32_t)s.ctx));
  w.SetValue(a + ".embedding_length", Value::Uint32((uint32_t)s.n_embd));
  w.SetValue(a + ".block_count", Value::Uint32((uint32_t)s.n_layer));
  w.SetValue(a + ".feed_forward_length", Value::Uint32((uint32_t)s.n_ff));
  w.SetValue(a + ".attention.head_count", Value::Uint32((uint32_t)s.n_head));
  w.SetValue(a + ".attention.head_count_kv", Value::Uint32((uint32_t)s.n_head_kv));
  w.SetValue(a + ".rope.dimension_count", Value::Uint32((uint32_t)head_dim));
  w.SetValue(a + ".rope.freq_base", Value::Float32((float)s.rope_base));
  w.SetValue(a + ".attention.layer_norm_rms_epsilon", Value::Float32((float)s.rms_eps));
  if (s.head_dim > 0) {
    w.SetValue(a + ".attention.key_length", Value::Uint32((uint32_t)head_dim));
    w.SetValue(a + ".attention.value_length", Value::Uint32((uint32_t)head_dim));
  }
  if (s.sliding_window > 0) {
    w.SetValue(a + ".attention.sliding_window", Value::Uint32((uint32_t)s.sliding_window));
  }
  if (a == "gemma2") {
    w.SetValue(a + ".attn_logit_softcapping", Value::Float32(50.0f));
    w.SetValue(a + ".final_logit_softcapping", Value::Float32(30.0f));
  }

  std::string vocab = o.vocab_from;
  if (vocab.empty() && !s.default_vocab.empty()) {
    const std::string candidate = ModelsDir() + "/" + s.default_vocab;
    if (FileExists(candidate)) vocab = candidate;
  }
  if (!vocab.empty()) {
    Status st = CopyTokenizer(w, vocab, s.n_vocab);
    if (!st.ok() && explicit_vocab) return st;
    if (!st.ok()) {
      std::fprintf(stderr, "tern model synth: %s; using a synthetic tokenizer\n",
                   st.message().c_str());
      SynthesizeTokenizer(w, s.n_vocab, s.arch);
    } else {
      std::fprintf(stderr, "tern model synth: tokenizer from %s\n", vocab.c_str());
    }
  } else {
    SynthesizeTokenizer(w, s.n_vocab, s.arch);
  }

  Progress progress("model synth", "layers", s.n_layer);
  TERN_RETURN_IF_ERROR(syn.AddMatrix("token_embd.weight", s.n_vocab, s.n_embd));
  for (int64_t l = 0; l < s.n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    TERN_RETURN_IF_ERROR(syn.AddVector(p + "attn_norm.weight", s.n_embd, true));
    if (a == "phi3") {  // Q, K, V fused
      TERN_RETURN_IF_ERROR(syn.AddMatrix(p + "attn_qkv.weight", q_dim + 2 * kv_dim, s.n_embd));
    } else {
      TERN_RETURN_IF_ERROR(syn.AddMatrix(p + "attn_q.weight", q_dim, s.n_embd));
      TERN_RETURN_IF_ERROR(syn.AddMatrix(p + "attn_k.weight", kv_dim, s.n_embd));
      TERN_RETURN_IF_ERROR(syn.AddMatrix(p + "attn_v.weight", kv_dim, s.n_embd));
    }
    if (a == "qwen2") {
      TERN_RETURN_IF_ERROR(syn.AddVector(p + "attn_q.bias", q_dim, false));
      TERN_RETURN_IF_ERROR(syn.AddVector(p + "attn_k.bias", kv_dim, false));
      TERN_RETURN_IF_ERROR(syn.AddVector(p + "attn_v.bias", kv_dim, false));
    }
    if (a == "qwen3" || a == "gemma3") {
      TERN_RETURN_IF_ERROR(syn.AddVector(p + "attn_q_norm.weight", head_dim, true));
      TERN_RETURN_IF_ERROR(syn.AddVector(p + "attn_k_norm.weight", head_dim, true));
    }
    TERN_RETURN_IF_ERROR(syn.AddMatrix(p + "attn_output.weight", s.n_embd, q_dim));
    if (gemma) TERN_RETURN_IF_ERROR(syn.AddVector(p + "post_attention_norm.weight", s.n_embd, true));
    TERN_RETURN_IF_ERROR(syn.AddVector(p + "ffn_norm.weight", s.n_embd, true));
    if (a == "phi3") {  // gate and up fused
      TERN_RETURN_IF_ERROR(syn.AddMatrix(p + "ffn_up.weight", 2 * s.n_ff, s.n_embd));
    } else {
      TERN_RETURN_IF_ERROR(syn.AddMatrix(p + "ffn_gate.weight", s.n_ff, s.n_embd));
      TERN_RETURN_IF_ERROR(syn.AddMatrix(p + "ffn_up.weight", s.n_ff, s.n_embd));
    }
    TERN_RETURN_IF_ERROR(syn.AddMatrix(p + "ffn_down.weight", s.n_embd, s.n_ff));
    if (gemma) TERN_RETURN_IF_ERROR(syn.AddVector(p + "post_ffw_norm.weight", s.n_embd, true));
    progress.Update(l + 1, FormatBytes((double)syn.bytes()));
  }
  progress.Finish(FormatBytes((double)syn.bytes()));
  TERN_RETURN_IF_ERROR(syn.AddVector("output_norm.weight", s.n_embd, true));
  if (!s.tied) TERN_RETURN_IF_ERROR(syn.AddMatrix("output.weight", s.n_vocab, s.n_embd));
  std::fprintf(stderr, "tern model synth: writing %s (%s)\n", o.out.c_str(),
               FormatBytes((double)syn.bytes()).c_str());
  return w.WriteFile(o.out);
}

int RunSynth(int argc, char** argv) {
  SynthOptions o;
  ArgParser p(
      "model synth [--preset NAME] [--type TYPE] [--seed S] [--vocab-from VOCAB.gguf] -o "
      "OUT.gguf",
      "Writes a random-weight GGUF with the shapes of a known model. Presets: tinyllama-1.1b, "
      "llama-3.2-1b, qwen2-0.5b, qwen3-0.6b, gemma2-2b, gemma3-1b, phi3-mini, mistral-7b, "
      "stories110m, tiny, and small test shapes of the families: qwen3-tiny, gemma2-tiny, "
      "gemma3-tiny, phi3-tiny, mistral-tiny. Dimension flags override the preset.");
  p.AddString("--preset", "NAME", &o.preset, "shape preset (default tiny)");
  p.AddInt("--n-embd", "N", &o.n_embd, "embedding width");
  p.AddInt("--n-layer", "N", &o.n_layer, "layers");
  p.AddInt("--n-head", "N", &o.n_head, "attention heads");
  p.AddInt("--n-head-kv", "N", &o.n_head_kv, "KV heads");
  p.AddInt("--n-ff", "N", &o.n_ff, "feed-forward width");
  p.AddInt("--n-vocab", "N", &o.n_vocab, "vocabulary size");
  p.AddInt("--ctx", "N", &o.ctx, "context_length metadata");
  p.AddInt("--head-dim", "N", &o.head_dim, "attention head width (default: the preset's)");
  p.AddInt("--sliding-window", "N", &o.sliding_window,
           "attention.sliding_window metadata (default: the preset's; -1 = none)");
  p.AddString("--type", "TYPE", &o.type,
              "f32|f16|bf16|q8_0|q4_0|q4_1|q5_0|q5_1|q4_k|q5_k|q6_k (default f16)");
  p.AddInt("--seed", "S", &o.seed, "random seed (default 1)");
  p.AddString("--vocab-from", "PATH", &o.vocab_from,
              "GGUF whose tokenizer.* metadata to copy (default: the preset's vocab from the "
              "models dir when present, else a synthetic tokenizer)");
  p.AddString("-o,--output", "PATH", &o.out, "output GGUF (required)");
  AddThreadsFlag(p, &o.threads);
  if (int rc = ParseOrExit(p, argc, argv, "model synth"); rc >= 0) return rc;
  auto fail = [](const std::string& msg) {
    std::fprintf(stderr, "tern model synth: %s\n", msg.c_str());
    return 1;
  };
  if (o.out.empty()) return fail("-o OUT.gguf is required");
  std::optional<Shape> shape = Preset(o.preset);
  if (!shape) return fail("unknown preset '" + o.preset + "'");
  Shape s = *shape;
  auto override_dim = [](int64_t v, int64_t* dst) {
    if (v > 0) *dst = v;
  };
  override_dim(o.n_embd, &s.n_embd);
  override_dim(o.n_layer, &s.n_layer);
  override_dim(o.n_head, &s.n_head);
  override_dim(o.n_head_kv, &s.n_head_kv);
  override_dim(o.n_ff, &s.n_ff);
  override_dim(o.n_vocab, &s.n_vocab);
  override_dim(o.ctx, &s.ctx);
  override_dim(o.head_dim, &s.head_dim);
  override_dim(o.sliding_window, &s.sliding_window);
  if (o.sliding_window < 0) s.sliding_window = 0;
  if (o.n_vocab > 0 && o.vocab_from.empty()) s.default_vocab.clear();
  if (s.n_head <= 0 || s.n_head_kv <= 0 || (s.head_dim == 0 && s.n_embd % s.n_head != 0) ||
      s.n_head % s.n_head_kv != 0) {
    return fail("n_embd must divide by n_head (or --head-dim be given) and n_head by n_head_kv");
  }
  if (s.HeadDim() % 2 != 0) return fail("the head dimension must be even");
  if (s.n_embd % 32 != 0) return fail("n_embd must be a multiple of 32");
  if (s.n_vocab < 3 || s.n_layer <= 0 || s.n_ff <= 0) return fail("bad dimensions");
  std::optional<DType> type = ParseDType(o.type);
  if (!type || !FileType(*type) || !quant::CanQuantize(*type)) {
    return fail("unsupported --type '" + o.type + "'");
  }
  if (!o.vocab_from.empty() && SameFile(o.vocab_from, o.out)) {
    return fail("-o " + o.out + " is the --vocab-from input; write the model elsewhere");
  }
  if (Status st = CheckWritableFile(o.out, "-o"); !st.ok()) return fail(st.message());
  Status st = Synthesize(o, s, *type, !o.vocab_from.empty());
  if (!st.ok()) return fail(st.message());
  return 0;
}

// `tern model grow`: a target for speculative decoding benchmarks whose
// acceptance against its source (the draft) is set by --noise
// (spec/model_copy.h, docs/speculative.md).
int RunGrow(int argc, char** argv) {
  std::string in, out;
  int64_t ffn_size = 0, extra_layers = 0, seed = 1;
  double noise = 0;
  ArgParser p("model grow -m SOURCE.gguf --ffn-size N [--extra-layers L] [--noise X] -o OUT.gguf",
              "Grows a target from an all-F32 llama-family source (e.g. stories260K): every FFN "
              "widened to --ffn-size hidden units and --extra-layers layers added, all new output "
              "projections carrying noise x rms N(0,1). With noise 0 it computes the source's "
              "function exactly at its own (bigger) cost per token; the noise sets how often it "
              "disagrees with the source used as a draft.");
  p.AddString("-m,--model", "FILE", &in, "source GGUF (all F32)");
  p.AddInt("--ffn-size", "N", &ffn_size, "feed-forward width of the target (>= the source's)");
  p.AddInt("--extra-layers", "L", &extra_layers, "layers added after the source's (default 0)");
  p.AddDouble("--noise", "X", &noise, "noise scale of the new output projections (default 0)");
  p.AddInt("--seed", "S", &seed, "random seed (default 1)");
  p.AddString("-o,--output", "PATH", &out, "output GGUF (required)");
  if (int rc = ParseOrExit(p, argc, argv, "model grow"); rc >= 0) return rc;
  auto fail = [](const std::string& msg) {
    std::fprintf(stderr, "tern model grow: %s\n", msg.c_str());
    return 1;
  };
  if (in.empty()) return fail("-m SOURCE.gguf is required");
  if (out.empty()) return fail("-o OUT.gguf is required");
  if (!(noise >= 0)) return fail("--noise must be >= 0");
  if (extra_layers < 0 || extra_layers > 1000) return fail("--extra-layers must be in [0, 1000]");
  if (Status st = CheckWritableFile(out, "-o"); !st.ok()) return fail(st.message());
  auto src = gguf::GgufFile::Open(in);
  if (!src.ok()) return fail(src.status().message());
  GrowOptions o;
  o.ffn_size = ffn_size;
  o.extra_layers = (int32_t)extra_layers;
  o.noise = noise;
  o.seed = (uint64_t)seed;
  if (Status st = GrowModel(**src, out, o); !st.ok()) return fail(st.message());
  std::fprintf(stderr, "tern model grow: wrote %s\n", out.c_str());
  return 0;
}

}  // namespace

int RunModel(int argc, char** argv) {
  const bool synth = argc >= 1 && std::strcmp(argv[0], "synth") == 0;
  const bool grow = argc >= 1 && std::strcmp(argv[0], "grow") == 0;
  if (!synth && !grow) {
    if (argc >= 1 && (std::strcmp(argv[0], "--help") == 0 || std::strcmp(argv[0], "-h") == 0)) {
      std::printf("usage: tern model synth [options] -o OUT.gguf (see tern model synth --help)\n"
                  "       tern model grow -m SOURCE.gguf --ffn-size N [options] -o OUT.gguf\n");
      return 0;
    }
    std::fprintf(stderr, "tern model: expected a subcommand: synth or grow\n");
    return 1;
  }
  return synth ? RunSynth(argc - 1, argv + 1) : RunGrow(argc - 1, argv + 1);
}

}  // namespace tern
