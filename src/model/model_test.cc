#include "model/model.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "base/paths.h"
#include "gguf/gguf_writer.h"
#include "kernels/kernel_table.h"
#include "model/sequence_runner.h"

namespace tern {
namespace {

std::string ModelPath(const std::string& rel) { return ModelsDir() + "/" + rel; }

#define SKIP_IF_ABSENT(path) \
  if (!FileExists(path)) GTEST_SKIP() << "test model not found: " << (path)

// Skips the test when `path` is absent, fails it when the model there does not
// load, else declares `std::unique_ptr<Model> model`.
#define MODEL_OR_SKIP(model, path) \
  SKIP_IF_ABSENT(path);            \
  auto model = LoadOrDie(path);    \
  ASSERT_NE(model, nullptr)

std::vector<int32_t> ReadIds(const std::string& path) {
  std::ifstream in(path);
  std::vector<int32_t> ids;
  int32_t id;
  while (in >> id) ids.push_back(id);
  return ids;
}

int32_t Argmax(std::span<const float> logits) {
  int32_t best = 0;
  for (int32_t i = 1; i < (int32_t)logits.size(); ++i) {
    if (logits[i] > logits[best]) best = i;
  }
  return best;
}

// Greedy from prompt: feeds the prompt, then n tokens one at a time.
std::vector<int32_t> Greedy(Model& model, const std::vector<int32_t>& prompt, int n,
                            DType kv_dtype = DType::kF32, int32_t chunk = 512) {
  SequenceRunner runner(model, (int32_t)prompt.size() + n + 1, kv_dtype, nullptr, chunk);
  EXPECT_TRUE(runner.Append(prompt, false).ok());
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) {
    const int32_t next = Argmax(runner.Logits(0));
    out.push_back(next);
    EXPECT_TRUE(runner.Append(std::vector<int32_t>{next}, false).ok());
  }
  return out;
}

std::unique_ptr<Model> LoadOrDie(const std::string& path) {
  auto model = Model::Load(path);
  EXPECT_TRUE(model.ok()) << model.status().message();
  if (!model.ok()) return nullptr;
  return std::move(model).value();
}

TEST(ModelTest, LoadsStories260KConfig) {
  const std::string path = ModelPath("stories260K.gguf");
  MODEL_OR_SKIP(model, path);
  const ModelConfig& c = model->config();
  EXPECT_EQ(c.arch, "llama");
  EXPECT_EQ(c.n_vocab, 512);
  EXPECT_EQ(c.n_embd, 64);
  EXPECT_EQ(c.n_layer, 5);
  EXPECT_EQ(c.n_head, 8);
  EXPECT_EQ(c.n_head_kv, 4);
  EXPECT_EQ(c.head_dim, 8);
  EXPECT_EQ(c.n_ff, 172);
  EXPECT_EQ(c.rope_dim, 8);
  EXPECT_FLOAT_EQ(c.rope_freq_base, 10000.0f);
  EXPECT_FLOAT_EQ(c.rms_eps, 1e-5f);
  EXPECT_FALSE(c.tied_embeddings);
  EXPECT_FALSE(c.rope_neox);
  EXPECT_GT(model->WeightBytes(), 0);
}

TEST(ModelTest, Stories260KGreedyMatchesGolden200) {
  const std::string path = ModelPath("stories260K.gguf");
  MODEL_OR_SKIP(model, path);
  const std::vector<int32_t> golden = ReadIds(ModelPath("golden/stories260K.greedy200.ids"));
  ASSERT_EQ(golden.size(), 200u);
  EXPECT_EQ(Greedy(*model, {1}, 200), golden);
}

TEST(ModelTest, Stories260KGreedyMatchesGoldenWithF16Kv) {
  const std::string path = ModelPath("stories260K.gguf");
  MODEL_OR_SKIP(model, path);
  const std::vector<int32_t> golden = ReadIds(ModelPath("golden/stories260K.greedy200.ids"));
  EXPECT_EQ(Greedy(*model, {1}, 200, DType::kF16), golden);
}

// Greedy tokens from prompt with K and V of the given types, and at each
// step the gap between the best and second-best logit.
struct GreedyRun {
  std::vector<int32_t> tokens;
  std::vector<float> gaps;
};
GreedyRun GreedyWithGaps(Model& model, const std::vector<int32_t>& prompt, int n, DType k,
                         DType v) {
  SequenceRunner runner(model, (int32_t)prompt.size() + n + 1, k, v, nullptr);
  EXPECT_TRUE(runner.Append(prompt, false).ok());
  GreedyRun r;
  for (int i = 0; i < n; ++i) {
    std::span<const float> logits = runner.Logits(0);
    const int32_t best = Argmax(logits);
    float second = -INFINITY;
    for (int32_t j = 0; j < (int32_t)logits.size(); ++j) {
      if (j != best) second = std::max(second, logits[j]);
    }
    r.tokens.push_back(best);
    r.gaps.push_back(logits[best] - second);
    EXPECT_TRUE(runner.Append(std::vector<int32_t>{best}, false).ok());
  }
  return r;
}

// A q8_0 cache (and K q8_0 with V q4_0) gives the f16 cache's greedy tokens
// up to the f16 run's first near-tie (top-2 logits within 0.1), from BOS and
// from story prompts. stories260K: head_dim 8, so each 32-value block spans
// the token's 4 KV heads.
TEST(ModelTest, Stories260KQuantizedKvGreedyEqualsF16UpToFirstNearTie) {
  const std::string path = ModelPath("stories260K.gguf");
  MODEL_OR_SKIP(model, path);
  const std::vector<std::vector<int32_t>> prompts = {
      {1}, {1, 403, 407, 261, 378}, {1, 400, 86, 268, 391, 294, 350, 261, 287, 348, 65}};
  constexpr float kNearTie = 0.1f;
  int compared = 0;
  for (const auto& prompt : prompts) {
    const GreedyRun f16 = GreedyWithGaps(*model, prompt, 200, DType::kF16, DType::kF16);
    size_t tie = 0;
    while (tie < f16.gaps.size() && f16.gaps[tie] >= kNearTie) ++tie;
    for (auto [k, v] : {std::pair{DType::kQ8_0, DType::kQ8_0},
                        std::pair{DType::kQ8_0, DType::kQ4_0}}) {
      const GreedyRun q = GreedyWithGaps(*model, prompt, 200, k, v);
      for (size_t i = 0; i < tie; ++i) {
        ASSERT_EQ(q.tokens[i], f16.tokens[i])
            << DTypeName(k) << "/" << DTypeName(v) << " step " << i << " of prompt "
            << prompt.size() << " (first f16 near-tie at " << tie << ")";
      }
    }
    compared += (int)tie;
  }
  EXPECT_GE(compared, 30) << "too few steps before the first near-tie to mean anything";
}

TEST(ModelTest, Stories260KLogitsMatchGoldenAtPositions0To3) {
  const std::string path = ModelPath("stories260K.gguf");
  MODEL_OR_SKIP(model, path);
  std::ifstream in(ModelPath("golden/stories260K.logits-pos0-3.txt"));
  ASSERT_TRUE(in) << "golden logits file missing";
  // Each line: "pos P input ID logits[0:512]: v0 v1 ...".
  std::vector<int32_t> inputs;
  std::vector<std::vector<float>> golden;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string w_pos, w_input, w_logits;
    int pos, id;
    ls >> w_pos >> pos >> w_input >> id >> w_logits;
    inputs.push_back(id);
    golden.emplace_back();
    float v;
    while (ls >> v) golden.back().push_back(v);
    ASSERT_EQ(golden.back().size(), 512u) << line.substr(0, 40);
  }
  ASSERT_EQ(inputs.size(), 4u);
  SequenceRunner runner(*model, 16, DType::kF32, nullptr);
  ASSERT_TRUE(runner.Append(inputs, true).ok());
  for (int p = 0; p < 4; ++p) {
    std::span<const float> got = runner.Logits(p);
    float max_abs = 0;
    for (float g : golden[p]) max_abs = std::max(max_abs, std::abs(g));
    for (int i = 0; i < 512; ++i) {
      ASSERT_NEAR(got[i], golden[p][i], 1e-4 * max_abs) << "pos " << p << " token " << i;
    }
  }
}

TEST(ModelTest, TinyRandomLlama2GreedyMatchesGolden32) {
  const std::string path = ModelPath("llama-2-tiny-random.gguf");
  MODEL_OR_SKIP(model, path);
  const std::vector<int32_t> golden = ReadIds(ModelPath("golden/llama-2-tiny-random.greedy32.ids"));
  ASSERT_EQ(golden.size(), 32u);
  EXPECT_EQ(model->config().n_vocab, 32000);
  EXPECT_EQ(Greedy(*model, {1}, 32), golden);
}

std::string WriteVariant(const std::string& name,
                         const std::vector<std::pair<std::string, gguf::Value>>& meta,
                         const std::string& drop_tensor, const std::string& transpose_tensor);

std::string LoadError(const std::string& path);

// --- Batch and chunk invariance ----------------------------------------------

// Eight different prompts (token ids of the stories260K vocabulary).
std::vector<std::vector<int32_t>> EightPrompts() {
  std::vector<std::vector<int32_t>> prompts;
  for (int s = 0; s < 8; ++s) {
    std::vector<int32_t> p = {1};
    const int len = 3 + 5 * s;  // 3 .. 38 tokens after BOS
    for (int i = 0; i < len; ++i) p.push_back(259 + (s * 37 + i * 11) % 250);
    prompts.push_back(p);
  }
  return prompts;
}

TEST(ModelTest, EightSequencesInOneBatchMatchEachAlone) {
  const std::string path = ModelPath("stories260K.gguf");
  MODEL_OR_SKIP(model, path);
  const auto prompts = EightPrompts();
  const int kSteps = 12;
  const int kSeqs = 8;
  const int32_t n_vocab = model->config().n_vocab;

  // Paged KV: sequence s owns blocks s, s + 8, s + 16, ... (interleaved, so a
  // wrong block table shows up).
  KvShape shape;
  shape.num_layers = model->config().n_layer;
  shape.num_kv_heads = model->config().n_head_kv;
  shape.head_dim = model->config().head_dim;
  shape.block_size = 4;
  shape.num_blocks = kSeqs * 16;
  shape.dtype = DType::kF32;
  KvStorage kv(shape);
  auto block_table = [&](int s, int32_t len) {
    std::vector<int32_t> t;
    for (int32_t b = 0; b * shape.block_size < len; ++b) t.push_back(s + kSeqs * b);
    return t;
  };
  auto slot = [&](int s, int32_t pos) {
    return (int64_t)(s + kSeqs * (pos / shape.block_size)) * shape.block_size +
           pos % shape.block_size;
  };

  std::vector<std::vector<int32_t>> seqs = prompts;
  std::vector<std::vector<int32_t>> generated(kSeqs);
  std::vector<int32_t> computed(kSeqs, 0);
  ThreadPool pool(2);
  for (int step = 0; step <= kSteps; ++step) {
    // Step 0 prefills every prompt; later steps decode one token each.
    ForwardBatch batch;
    for (int s = 0; s < kSeqs; ++s) {
      ForwardSequence fs;
      fs.first_token = batch.num_tokens();
      for (int32_t pos = computed[s]; pos < (int32_t)seqs[s].size(); ++pos) {
        batch.token_ids.push_back(seqs[s][pos]);
        batch.positions.push_back(pos);
        batch.slots.push_back(slot(s, pos));
      }
      fs.num_tokens = batch.num_tokens() - fs.first_token;
      fs.context_len = (int32_t)seqs[s].size();
      fs.block_table = block_table(s, fs.context_len);
      batch.logits_rows.push_back(batch.num_tokens() - 1);
      batch.sequences.push_back(fs);
      computed[s] = fs.context_len;
    }
    std::vector<float> logits(kSeqs * n_vocab);
    model->Forward(batch, kv, logits.data(), &pool);
    for (int s = 0; s < kSeqs; ++s) {
      const int32_t next = Argmax({logits.data() + s * n_vocab, (size_t)n_vocab});
      generated[s].push_back(next);
      seqs[s].push_back(next);
    }
  }
  for (int s = 0; s < kSeqs; ++s) {
    EXPECT_EQ(generated[s], Greedy(*model, prompts[s], kSteps + 1)) << "sequence " << s;
  }
}

TEST(ModelTest, ChunkedPrefillMatchesWholePrefill) {
  const std::string path = ModelPath("stories260K.gguf");
  MODEL_OR_SKIP(model, path);
  std::vector<int32_t> prompt = {1};
  for (int i = 0; i < 100; ++i) prompt.push_back(259 + (i * 13) % 250);
  SequenceRunner whole(*model, 128, DType::kF32, nullptr, 512);
  ASSERT_TRUE(whole.Append(prompt, false).ok());
  const std::vector<float> ref(whole.Logits(0).begin(), whole.Logits(0).end());
  const std::vector<int32_t> ref_tokens = Greedy(*model, prompt, 16, DType::kF32, 512);
  for (int32_t chunk : {1, 7, 64}) {
    SequenceRunner runner(*model, 128, DType::kF32, nullptr, chunk);
    ASSERT_TRUE(runner.Append(prompt, false).ok());
    std::span<const float> got = runner.Logits(0);
    float max_abs = 0;
    for (float v : ref) max_abs = std::max(max_abs, std::abs(v));
    for (size_t i = 0; i < ref.size(); ++i) {
      ASSERT_NEAR(got[i], ref[i], 1e-5 * max_abs) << "chunk " << chunk << " token " << i;
    }
    EXPECT_EQ(Greedy(*model, prompt, 16, DType::kF32, chunk), ref_tokens) << "chunk " << chunk;
  }
}

TEST(ModelTest, AppendBeyondContextFailsAndRunsNothing) {
  const std::string path = ModelPath("stories260K.gguf");
  MODEL_OR_SKIP(model, path);
  SequenceRunner runner(*model, 8, DType::kF32, nullptr);
  const std::vector<int32_t> tokens(9, 1);
  const Status st = runner.Append(tokens, false);
  EXPECT_FALSE(st.ok());
  EXPECT_THAT(st.message(), testing::HasSubstr("exceeds the context of 8"));
  EXPECT_EQ(runner.num_computed(), 0);
  EXPECT_FALSE(runner.Append(std::vector<int32_t>{512}, false).ok());  // out of vocab
}

TEST(ModelTest, SlidingWindowMasksOlderPositions) {
  SKIP_IF_ABSENT(ModelPath("stories260K.gguf"));
  // Window 1: each token sees only itself, so its logits cannot depend on
  // what came before or on its position.
  auto narrow = LoadOrDie(
      WriteVariant("window1", {{"llama.attention.sliding_window", gguf::Value::Uint32(1)}}, "", ""));
  ASSERT_NE(narrow, nullptr);
  EXPECT_EQ(narrow->config().sliding_window, 1);
  SequenceRunner long_ctx(*narrow, 16, DType::kF32, nullptr);
  ASSERT_TRUE(long_ctx.Append(std::vector<int32_t>{1, 403, 407, 261}, true).ok());
  SequenceRunner alone(*narrow, 16, DType::kF32, nullptr);
  ASSERT_TRUE(alone.Append(std::vector<int32_t>{407}, true).ok());
  for (int i = 0; i < 512; ++i) ASSERT_NEAR(long_ctx.Logits(2)[i], alone.Logits(0)[i], 1e-4);
  // A window at least as long as the sequence changes nothing.
  auto wide = LoadOrDie(
      WriteVariant("window256", {{"llama.attention.sliding_window", gguf::Value::Uint32(256)}}, "", ""));
  ASSERT_NE(wide, nullptr);
  const std::vector<int32_t> golden = ReadIds(ModelPath("golden/stories260K.greedy200.ids"));
  EXPECT_EQ(Greedy(*wide, {1}, 200), golden);
  // A window of 32 does change a long continuation.
  auto w32 = LoadOrDie(
      WriteVariant("window32", {{"llama.attention.sliding_window", gguf::Value::Uint32(32)}}, "", ""));
  ASSERT_NE(w32, nullptr);
  const std::vector<int32_t> got = Greedy(*w32, {1}, 200);
  EXPECT_EQ(std::vector<int32_t>(got.begin(), got.begin() + 31),
            std::vector<int32_t>(golden.begin(), golden.begin() + 31));
  EXPECT_NE(got, golden);
}

TEST(ModelTest, LinearRopeScalingEqualsUniformFrequencyFactors) {
  SKIP_IF_ABSENT(ModelPath("stories260K.gguf"));
  // Linear scaling by 2 halves every angle; so does a rope_freqs.weight of
  // all 2 (the per-frequency factors of llama3-style files).
  auto linear = LoadOrDie(WriteVariant(
      "rope-linear2",
      {{"llama.rope.scaling.type", gguf::Value::String("linear")},
       {"llama.rope.scaling.factor", gguf::Value::Float32(2.0f)}},
      "", ""));
  ASSERT_NE(linear, nullptr);
  EXPECT_FLOAT_EQ(linear->config().rope_freq_scale, 0.5f);

  auto src = gguf::GgufFile::Open(ModelPath("stories260K.gguf"));
  ASSERT_TRUE(src.ok());
  gguf::GgufWriter w;
  w.CopyMetadataFrom(**src);
  for (const gguf::TensorInfo& t : (*src)->tensors()) {
    ASSERT_TRUE(w.AddTensor(t.name, t.dtype, t.shape, t.data, t.num_bytes).ok());
  }
  const std::vector<float> factors(4, 2.0f);  // rope_dim / 2
  ASSERT_TRUE(w.AddTensor("rope_freqs.weight", DType::kF32, {4}, factors.data(), 16).ok());
  const std::string path = testing::TempDir() + "/rope-freqs2.gguf";
  ASSERT_TRUE(w.WriteFile(path).ok());
  auto factored = LoadOrDie(path);
  ASSERT_NE(factored, nullptr);

  const std::vector<int32_t> tokens = {1, 403, 407, 261, 378, 432, 383, 286};
  SequenceRunner a(*linear, 16, DType::kF32, nullptr);
  SequenceRunner b(*factored, 16, DType::kF32, nullptr);
  ASSERT_TRUE(a.Append(tokens, false).ok());
  ASSERT_TRUE(b.Append(tokens, false).ok());
  for (int i = 0; i < 512; ++i) ASSERT_NEAR(a.Logits(0)[i], b.Logits(0)[i], 1e-4);
  // And scaling does change the result.
  auto plain = LoadOrDie(ModelPath("stories260K.gguf"));
  SequenceRunner c(*plain, 16, DType::kF32, nullptr);
  ASSERT_TRUE(c.Append(tokens, false).ok());
  double diff = 0;
  for (int i = 0; i < 512; ++i) diff = std::max(diff, (double)std::abs(a.Logits(0)[i] - c.Logits(0)[i]));
  EXPECT_GT(diff, 1e-2);
}

TEST(ModelErrorTest, UnsupportedRopeScalingIsNamed) {
  SKIP_IF_ABSENT(ModelPath("stories260K.gguf"));
  const std::string path = WriteVariant(
      "rope-yarn", {{"llama.rope.scaling.type", gguf::Value::String("yarn")}}, "", "");
  EXPECT_THAT(LoadError(path), testing::HasSubstr("rope scaling type 'yarn' is not supported"));
}

class RecordingObserver : public MatMulObserver {
 public:
  void OnMatMul(const std::string& weight_name, const float* x, int64_t num_tokens,
                int64_t cols) override {
    calls.push_back(weight_name + " " + std::to_string(num_tokens) + "x" + std::to_string(cols));
    EXPECT_TRUE(std::isfinite(x[num_tokens * cols - 1]));
  }
  std::vector<std::string> calls;
};

TEST(ModelTest, ObserverSeesEveryWeightMatMulInOrder) {
  SKIP_IF_ABSENT(ModelPath("stories260K.gguf"));
  auto model = LoadOrDie(ModelPath("stories260K.gguf"));
  ASSERT_NE(model, nullptr);
  RecordingObserver observer;
  model->SetMatMulObserver(&observer);
  SequenceRunner runner(*model, 16, DType::kF32, nullptr);
  ASSERT_TRUE(runner.Append(std::vector<int32_t>{1, 403, 407}, false).ok());
  ASSERT_EQ(observer.calls.size(), 5u * 7 + 1);
  EXPECT_EQ(observer.calls[0], "blk.0.attn_q.weight 3x64");
  EXPECT_EQ(observer.calls[6], "blk.0.ffn_down.weight 3x172");
  EXPECT_EQ(observer.calls.back(), "output.weight 1x64");
  model->SetMatMulObserver(nullptr);
  ASSERT_TRUE(runner.Append(std::vector<int32_t>{261}, false).ok());
  EXPECT_EQ(observer.calls.size(), 5u * 7 + 1);
}

// --- Quantized files ----------------------------------------------------------

// Teacher-forced agreement: the quantized model's argmax at each step of the
// F32 model's greedy continuation from BOS.
double ArgmaxAgreement(Model& quantized, const std::vector<int32_t>& tokens) {
  SequenceRunner runner(quantized, (int32_t)tokens.size() + 1, DType::kF32, nullptr);
  std::vector<int32_t> input = {1};
  input.insert(input.end(), tokens.begin(), tokens.end() - 1);
  EXPECT_TRUE(runner.Append(input, true).ok());
  int agree = 0;
  for (size_t i = 0; i < tokens.size(); ++i) agree += Argmax(runner.Logits((int32_t)i)) == tokens[i];
  return (double)agree / tokens.size();
}

// For each (quant, minimum) whose file quantized/<prefix><quant>.gguf exists:
// teacher-forced argmax agreement with `ref` (the F32 model's greedy tokens
// from BOS) is at least the minimum, and the first `same_steps` greedy tokens
// are ref's.
void ExpectQuantizedAgree(const std::string& prefix,
                          const std::vector<std::pair<std::string, double>>& cases,
                          const std::vector<int32_t>& ref, int same_steps) {
  for (const auto& [name, min_agree] : cases) {
    const std::string path = ModelPath("quantized/" + prefix + name + ".gguf");
    if (!FileExists(path)) continue;
    auto model = LoadOrDie(path);
    if (model == nullptr) continue;
    const double agree = ArgmaxAgreement(*model, ref);
    EXPECT_GE(agree, min_agree) << prefix << name;
    if (same_steps > 0) {
      EXPECT_EQ(Greedy(*model, {1}, same_steps),
                std::vector<int32_t>(ref.begin(), ref.begin() + same_steps))
          << prefix << name;
    }
    std::printf("[ info ] %s%s: argmax agreement with F32 %.3f\n", prefix.c_str(), name.c_str(),
                agree);
  }
}

TEST(ModelTest, QuantizedStories260KAgreesWithF32) {
  const std::string path = ModelPath("stories260K.gguf");
  MODEL_OR_SKIP(f32, path);
  // Minimum teacher-forced argmax agreement over 64 steps; the first greedy
  // steps are the same tokens.
  ExpectQuantizedAgree("stories260K-",
                       {{"F16", 0.98}, {"Q8_0", 0.95}, {"Q5_1", 0.85}, {"Q5_0", 0.85},
                        {"Q4_1", 0.7}, {"Q4_0", 0.7}},
                       Greedy(*f32, {1}, 64), /*same_steps=*/4);
}

TEST(ModelTest, QuantizedTinyKAgreesWithF32) {
  const std::string path = ModelPath("quantized/tiny-k-F32.gguf");
  MODEL_OR_SKIP(f32, path);
  // Minimum teacher-forced argmax agreement over 64 steps (random weights,
  // so looser than for the trained model).
  ExpectQuantizedAgree("tiny-k-",
                       {{"Q8_0", 0.9}, {"Q6_K", 0.8}, {"Q5_K_M", 0.7}, {"Q4_K_M", 0.6},
                        {"Q4_K_S", 0.6}, {"Q4_0", 0.5}, {"Q3_K_M", 0.4}, {"Q2_K", 0.2}},
                       Greedy(*f32, {1}, 64), /*same_steps=*/0);
}

// Where the faster weight layout depends on the CPU (kernels::UsePanel16:
// the AVX2 table's Q4_0, Q8_0 and K-quants), a model loaded in the kernels' tiles and in the
// file's rows gives the same logits, bitwise: prefill and decode, on every
// x86 table this CPU runs (the others keep one layout).
TEST(ModelTest, WeightLayoutChoiceNeverChangesLogits) {
  struct Restore {
    ~Restore() {
      kernels::SetWeightLayoutChoice(kernels::WeightLayoutChoice::kTimed);
      kernels::SelectKernelTable("");
    }
  } restore;
  int compared = 0;
  for (const char* isa : {"", "avx2"}) {
    kernels::SelectKernelTable(isa);
    for (const char* name : {"tiny-k-Q4_K_M", "tiny-k-Q5_K_M", "tiny-k-Q6_K", "tiny-k-Q4_0",
                             "tiny-k-Q8_0", "stories260K-Q4_0", "stories260K-Q8_0"}) {
      const std::string path = ModelPath(std::string("quantized/") + name + ".gguf");
      if (!FileExists(path)) continue;
      std::vector<float> logits[2];
      int64_t packed[2] = {0, 0};
      for (int i = 0; i < 2; ++i) {
        kernels::SetWeightLayoutChoice(i == 0 ? kernels::WeightLayoutChoice::kTiles
                                              : kernels::WeightLayoutChoice::kRows);
        auto model = LoadOrDie(path);
        ASSERT_NE(model, nullptr);
        packed[i] = model->PackedWeightBytes();
        SequenceRunner runner(*model, 16, DType::kF32, nullptr);
        ASSERT_TRUE(runner.Append(std::vector<int32_t>{1, 5, 9, 13, 17, 21}, true).ok());
        for (int p = 0; p < 6; ++p) {
          const std::span<const float> l = runner.Logits(p);
          logits[i].insert(logits[i].end(), l.begin(), l.end());
        }
        for (int step = 0; step < 3; ++step) {
          const int32_t next = Argmax(runner.Logits(0));
          ASSERT_TRUE(runner.Append(std::vector<int32_t>{next}, false).ok());
          const std::span<const float> l = runner.Logits(0);
          logits[i].insert(logits[i].end(), l.begin(), l.end());
        }
      }
      ASSERT_EQ(logits[0].size(), logits[1].size());
      EXPECT_EQ(0, std::memcmp(logits[0].data(), logits[1].data(),
                               logits[0].size() * sizeof(float)))
          << name << " on " << kernels::ActiveIsa();
      if (std::string(kernels::ActiveIsa()) == "avx2") {
        EXPECT_GT(packed[0], packed[1]) << name << ": the rows choice packed as much";
      }
      ++compared;
    }
  }
  if (compared == 0) GTEST_SKIP() << "no tiny-k or stories260K quantized files in " << ModelsDir() << "/quantized";
}

// --- Errors -------------------------------------------------------------------

// Writes a copy of stories260K with edits: metadata overrides, a dropped
// tensor, a tensor whose shape is transposed.
std::string WriteVariant(const std::string& name,
                         const std::vector<std::pair<std::string, gguf::Value>>& meta,
                         const std::string& drop_tensor, const std::string& transpose_tensor) {
  auto src = gguf::GgufFile::Open(ModelPath("stories260K.gguf"));
  EXPECT_TRUE(src.ok());
  gguf::GgufWriter w;
  w.CopyMetadataFrom(**src);
  for (const auto& [k, v] : meta) w.SetValue(k, v);
  for (const gguf::TensorInfo& t : (*src)->tensors()) {
    if (t.name == drop_tensor) continue;
    std::vector<int64_t> shape = t.shape;
    if (t.name == transpose_tensor) std::reverse(shape.begin(), shape.end());
    EXPECT_TRUE(w.AddTensor(t.name, t.dtype, shape, t.data, t.num_bytes).ok());
  }
  const std::string path = testing::TempDir() + "/" + name + ".gguf";
  const Status st = w.WriteFile(path);
  EXPECT_TRUE(st.ok()) << st.message();
  return path;
}

std::string LoadError(const std::string& path) {
  auto model = Model::Load(path);
  EXPECT_FALSE(model.ok());
  return model.ok() ? "" : model.status().message();
}

TEST(ModelErrorTest, MissingFileNamesThePath) {
  const std::string path = testing::TempDir() + "/no-such-model.gguf";
  EXPECT_THAT(LoadError(path), testing::HasSubstr("no-such-model.gguf"));
}

TEST(ModelErrorTest, NotAGgufFileIsRejected) {
  const std::string path = testing::TempDir() + "/not-a-model.gguf";
  std::ofstream(path) << "this is a text file, not a model\n";
  EXPECT_THAT(LoadError(path), testing::HasSubstr("not-a-model.gguf"));
}

TEST(ModelErrorTest, UnsupportedArchitectureIsNamed) {
  SKIP_IF_ABSENT(ModelPath("stories260K.gguf"));
  const std::string path =
      WriteVariant("arch-gpt2", {{"general.architecture", gguf::Value::String("gpt2")}}, "", "");
  EXPECT_THAT(LoadError(path),
              testing::HasSubstr("unsupported architecture 'gpt2' (supported: llama, qwen2, qwen3, gemma2, gemma3, phi3)"));
}

TEST(ModelErrorTest, MissingTensorIsNamed) {
  SKIP_IF_ABSENT(ModelPath("stories260K.gguf"));
  const std::string path = WriteVariant("no-ffn-up", {}, "blk.3.ffn_up.weight", "");
  EXPECT_THAT(LoadError(path), testing::HasSubstr("missing tensor 'blk.3.ffn_up.weight'"));
}

TEST(ModelErrorTest, TensorShapeDisagreeingWithConfigIsNamed) {
  SKIP_IF_ABSENT(ModelPath("stories260K.gguf"));
  const std::string path = WriteVariant("bad-shape", {}, "", "blk.1.ffn_gate.weight");
  EXPECT_THAT(LoadError(path), testing::HasSubstr("tensor 'blk.1.ffn_gate.weight' has shape "
                                                  "[172, 64], expected [64, 172]"));
}

TEST(ModelErrorTest, ConfigThatDisagreesWithTensorsIsCaught) {
  SKIP_IF_ABSENT(ModelPath("stories260K.gguf"));
  const std::string path = WriteVariant(
      "bad-ff", {{"llama.feed_forward_length", gguf::Value::Uint32(256)}}, "", "");
  EXPECT_THAT(LoadError(path), testing::HasSubstr("tensor 'blk.0.ffn_gate.weight' has shape "
                                                  "[64, 172], expected [64, 256]"));
}

TEST(ModelErrorTest, MissingRequiredKeyIsNamed) {
  SKIP_IF_ABSENT(ModelPath("stories260K.gguf"));
  auto src = gguf::GgufFile::Open(ModelPath("stories260K.gguf"));
  ASSERT_TRUE(src.ok());
  gguf::GgufWriter w;
  for (const auto& [k, v] : (*src)->metadata()) {
    if (k != "llama.block_count") w.SetValue(k, v);
  }
  const std::string path = testing::TempDir() + "/no-block-count.gguf";
  ASSERT_TRUE(w.WriteFile(path).ok());
  EXPECT_THAT(LoadError(path), testing::HasSubstr("llama.block_count"));
}

TEST(ModelTest, TiedEmbeddingsUseTokenEmbeddingAsOutput) {
  SKIP_IF_ABSENT(ModelPath("stories260K.gguf"));
  // stories260K's output.weight is byte-identical to token_embd.weight, so
  // dropping it must not change the greedy tokens.
  const std::string path = WriteVariant("tied", {}, "output.weight", "");
  auto model = LoadOrDie(path);
  ASSERT_NE(model, nullptr);
  EXPECT_TRUE(model->config().tied_embeddings);
  const std::vector<int32_t> golden = ReadIds(ModelPath("golden/stories260K.greedy200.ids"));
  EXPECT_EQ(Greedy(*model, {1}, 50), std::vector<int32_t>(golden.begin(), golden.begin() + 50));
}

// Writes stories260K as a qwen2 file at `path`: the architecture renamed,
// every "llama." key moved to "qwen2.", and each tensor as `add` adds it.
Status WriteStoriesAsQwen2(
    const std::string& path,
    const std::function<Status(const gguf::TensorInfo&, gguf::GgufWriter&)>& add) {
  auto src = gguf::GgufFile::Open(ModelPath("stories260K.gguf"));
  if (!src.ok()) return src.status();
  gguf::GgufWriter w;
  for (const auto& [k, v] : (*src)->metadata()) {
    if (k == "general.architecture") w.SetValue(k, gguf::Value::String("qwen2"));
    else if (k.rfind("llama.", 0) == 0) w.SetValue("qwen2." + k.substr(6), v);
    else w.SetValue(k, v);
  }
  for (const gguf::TensorInfo& t : (*src)->tensors()) TERN_RETURN_IF_ERROR(add(t, w));
  return w.WriteFile(path);
}

TEST(ModelTest, Qwen2VariantWithNeoxRopeMatchesLlama) {
  SKIP_IF_ABSENT(ModelPath("stories260K.gguf"));
  // The same network as a qwen2 file: keys renamed, zero Q/K/V biases, and
  // Q/K rows of each head reordered from interleaved pairs (2i, 2i+1) to
  // halves (i, i + hd/2), so NeoX RoPE computes the same attention scores.
  const int hd = 8;
  auto add = [&](const gguf::TensorInfo& t, gguf::GgufWriter& w) -> Status {
    if (t.dtype != DType::kF32) return InvalidArgument(t.name + " is not F32");
    const float* data = reinterpret_cast<const float*>(t.data);
    std::vector<float> out(data, data + t.NumElements());
    const bool is_q = t.name.find("attn_q.weight") != std::string::npos;
    const bool is_k = t.name.find("attn_k.weight") != std::string::npos;
    if (is_q || is_k) {
      const int64_t cols = t.shape[0], rows = t.shape[1];
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t head = r / hd, d = r % hd;
        // new row d < hd/2 <- old 2d; new row d >= hd/2 <- old 2(d - hd/2) + 1
        const int64_t old_d = d < hd / 2 ? 2 * d : 2 * (d - hd / 2) + 1;
        std::copy(data + (head * hd + old_d) * cols, data + (head * hd + old_d + 1) * cols,
                  out.begin() + r * cols);
      }
    }
    TERN_RETURN_IF_ERROR(w.AddTensor(t.name, t.dtype, t.shape, out.data(), t.num_bytes));
    if (is_q || is_k || t.name.find("attn_v.weight") != std::string::npos) {
      std::string bias = t.name.substr(0, t.name.size() - 6) + "bias";
      std::vector<float> zeros(t.shape[1], 0.0f);
      TERN_RETURN_IF_ERROR(w.AddTensor(bias, DType::kF32, {t.shape[1]}, zeros.data(),
                                       zeros.size() * sizeof(float)));
    }
    return Status::Ok();
  };
  const std::string path = testing::TempDir() + "/qwen2-variant.gguf";
  const Status written = WriteStoriesAsQwen2(path, add);
  ASSERT_TRUE(written.ok()) << written.message();
  auto model = LoadOrDie(path);
  ASSERT_NE(model, nullptr);
  EXPECT_EQ(model->config().arch, "qwen2");
  EXPECT_TRUE(model->config().rope_neox);
  const std::vector<int32_t> golden = ReadIds(ModelPath("golden/stories260K.greedy200.ids"));
  EXPECT_EQ(Greedy(*model, {1}, 100), std::vector<int32_t>(golden.begin(), golden.begin() + 100));
}

TEST(ModelErrorTest, Qwen2WithoutBiasNamesTheTensor) {
  SKIP_IF_ABSENT(ModelPath("stories260K.gguf"));
  const std::string path = testing::TempDir() + "/qwen2-nobias.gguf";
  const Status written =
      WriteStoriesAsQwen2(path, [](const gguf::TensorInfo& t, gguf::GgufWriter& w) {
        return w.AddTensor(t.name, t.dtype, t.shape, t.data, t.num_bytes);
      });
  ASSERT_TRUE(written.ok()) << written.message();
  EXPECT_THAT(LoadError(path), testing::HasSubstr("missing tensor 'blk.0.attn_q.bias'"));
}

}  // namespace
}  // namespace tern
