#include "engine/engine.h"

#include <algorithm>
#include <cinttypes>
#include <random>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "base/log.h"
#include "base/progress.h"
#include "base/thread_pool.h"
#include "engine/engine_core.h"
#include "engine/model_runner.h"
#include "kv/kv_config.h"
#include "kv/kv_storage.h"
#include "model/model.h"
#include "sample/request_checks.h"
#include "spec/draft_model_proposer.h"
#include "spec/ngram_proposer.h"
#include "spec/step_calibration.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab.h"

namespace tern {

struct Engine::Impl {
  EngineConfig config;
  std::unique_ptr<Model> model;
  std::unique_ptr<Tokenizer> tokenizer;
  KvConfig kv_config;
  std::unique_ptr<KvStorage> kv_storage;
  std::unique_ptr<ThreadPool> pool;
  std::unique_ptr<EngineCore> core;  // engine thread only (or after join)
  std::vector<std::pair<int32_t, double>> spec_step_times;  // measured at start-up

  // Shared with front-end threads, guarded by mu.
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::unique_ptr<Request>> incoming;
  std::vector<std::pair<std::string, FinishReason>> finishes;
  std::unordered_map<std::string, std::shared_ptr<OutputChannel>> channels;
  bool stopping = false;
  bool stopped = false;
  uint64_t next_request_number = 0;
  std::mt19937_64 seed_rng{std::random_device{}()};

  mutable std::mutex stats_mu;
  EngineStats stats;
  uint64_t last_published_step = 0;  // engine thread only

  // WaitForOutputs.
  mutable std::mutex output_mu;
  mutable std::condition_variable output_cv;
  uint64_t output_generation = 0;  // guarded by output_mu

  std::thread thread;

  void Loop();
  void Deliver(std::vector<RequestDelta>& deltas);
  void PublishStats();
  void AbortEverything();
};

namespace {

Status ValidateConfig(const EngineConfig& c) {
  if (c.max_num_seqs < 1) return InvalidArgument("--max-num-seqs must be >= 1, got " + std::to_string(c.max_num_seqs));
  if (c.max_num_batched_tokens < 1) {
    return InvalidArgument("--max-num-batched-tokens must be >= 1, got " +
                           std::to_string(c.max_num_batched_tokens));
  }
  if (c.max_model_len < 0) return InvalidArgument("--max-model-len must be >= 0, got " + std::to_string(c.max_model_len));
  if (c.block_size < 1 || c.block_size > 1024) {
    return InvalidArgument("--block-size must be in [1, 1024], got " + std::to_string(c.block_size));
  }
  if (c.kv_cache_memory_bytes < 0) return InvalidArgument("--kv-cache-memory must be positive");
  if (c.max_num_partial_prefills < 1) {
    return InvalidArgument("--max-num-partial-prefills must be >= 1, got " +
                           std::to_string(c.max_num_partial_prefills));
  }
  if (c.max_prefill_tokens_while_decoding < 0) {
    return InvalidArgument("--max-prefill-tokens-while-decoding must be >= 0, got " +
                           std::to_string(c.max_prefill_tokens_while_decoding));
  }
  if (!(c.target_itl_ms >= 0)) {
    return InvalidArgument("--target-itl-ms must be >= 0, got " + std::to_string(c.target_itl_ms));
  }
  if (!(c.target_itl_factor >= 1)) {
    return InvalidArgument("--target-itl-factor must be >= 1, got " +
                           std::to_string(c.target_itl_factor));
  }
  if (c.kv_eviction == KvEviction::kStreaming) {
    if (!c.enable_chunked_prefill) {
      return InvalidArgument("--kv-eviction streaming needs chunked prefill (drop --no-enable-chunked-prefill)");
    }
    if (c.kv_sink_tokens < 0) {
      return InvalidArgument("--kv-sink-tokens must be >= 0, got " + std::to_string(c.kv_sink_tokens));
    }
    if (c.kv_window_tokens < 0) {
      return InvalidArgument("--kv-window must be >= 0, got " + std::to_string(c.kv_window_tokens));
    }
    if (c.speculative_method != SpecMethod::kNone) {
      return InvalidArgument(
          "--kv-eviction streaming cannot be combined with --speculative-method (not built yet)");
    }
  }
  if (c.speculative_method != SpecMethod::kNone) {
    if (c.num_speculative_tokens < 1 || c.num_speculative_tokens > kMaxSpeculativeTokens) {
      return InvalidArgument("--num-speculative-tokens must be in [1, " +
                             std::to_string(kMaxSpeculativeTokens) + "], got " +
                             std::to_string(c.num_speculative_tokens));
    }
  }
  if (c.speculative_method == SpecMethod::kNgram &&
      (c.ngram_min < 1 || c.ngram_max < c.ngram_min || c.ngram_max > 1024)) {
    return InvalidArgument("--ngram-min/--ngram-max must satisfy 1 <= min <= max <= 1024, got min " +
                           std::to_string(c.ngram_min) + ", max " + std::to_string(c.ngram_max));
  }
  if (c.speculative_method == SpecMethod::kDraft && c.speculative_model.empty()) {
    return InvalidArgument("--speculative-method draft needs --speculative-model DRAFT.gguf");
  }
  for (DType t : {c.kv_cache_dtype, c.kv_cache_dtype_v.value_or(c.kv_cache_dtype)}) {
    if (!kernels::IsKvDtype(t)) {
      return InvalidArgument(std::string("--kv-cache-dtype ") + DTypeName(t) +
                             " is not supported by the engine (f16, bf16, f32, q8_0, q4_0)");
    }
  }
  return Status::Ok();
}

// The request checks every front end shares (sample/request_checks.h).
Status ValidateSampling(const std::string& id, const SamplingParams& p) {
  if (MaybeFieldError e = CheckSamplingParams(p)) {
    return InvalidArgument("request " + id + ": " + e->Text(e->field));
  }
  return Status::Ok();
}

// Streaming eviction within max_model_len positions per request; the step
// budget shrinks to the largest chunk an eviction always makes room for.
Status SetUpStreamingEviction(const EngineConfig& c, const KvConfig& kv, KvCacheManager& manager,
                              SchedulerConfig& sc) {
  const int32_t max_len = kv.max_model_len, bs = kv.block_size;
  const int32_t window = c.kv_window_tokens > 0 ? c.kv_window_tokens : max_len / 2;
  const int32_t sinks = (c.kv_sink_tokens + bs - 1) / bs * bs;
  if ((int64_t)sinks + window + bs > max_len) {
    return InvalidArgument("--kv-eviction streaming: --kv-sink-tokens " +
                           std::to_string(c.kv_sink_tokens) + " (" + std::to_string(sinks) +
                           " as whole blocks of " + std::to_string(bs) + ") + --kv-window " +
                           std::to_string(window) + " + one block must fit max_model_len " +
                           std::to_string(max_len));
  }
  manager.SetStreamingEviction(c.kv_sink_tokens, window, max_len);
  const int32_t chunk = manager.MaxStreamingChunk();
  if (sc.max_num_batched_tokens > chunk) {
    TERN_LOG_INFO("streaming KV eviction: --max-num-batched-tokens %d -> %d (sinks %d + window %d "
                  "+ a step's tokens within max_model_len %d)",
                  sc.max_num_batched_tokens, chunk, sinks, window, max_len);
    sc.max_num_batched_tokens = chunk;
  }
  TERN_LOG_INFO("streaming KV eviction: each request keeps its first %d tokens and at least the "
                "last %d within %d positions; older blocks are dropped",
                sinks, window, max_len);
  return Status::Ok();
}

// One forward pass of a single token through every layer and the output
// matrix before the first request, as llama.cpp warms up: the weights are
// paged in from the mapped file and the kernels' scratch grows here, not in
// the first request's step (2 cores, `tern batch`, tinyllama shape Q4_0: a
// first step of 64 prompt tokens took 0.9 s without it, one of 48 0.24 s
// with it), and the step-cost model's first observation is a warm step.
// The token goes to slot 0 of block 0, which no request holds yet (a
// request writes a slot before it reads it).
void WarmUp(Model& model, KvStorage& kv, ThreadPool* pool) {
  ForwardBatch batch;
  ForwardSequence seq;
  seq.num_tokens = 1;
  seq.context_len = 1;
  seq.block_table = {0};
  batch.token_ids = {0};
  batch.positions = {0};
  batch.slots = {0};
  if (kv.has_window_group()) {
    seq.window_block_table = {0};
    batch.window_slots = {0};
  }
  batch.logits_rows = {0};
  batch.sequences.push_back(std::move(seq));
  std::vector<float> logits(model.config().n_vocab);
  model.Forward(batch, kv, logits.data(), pool);
}

std::string Percent(double x) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f%%", 100.0 * x);
  return buf;
}

}  // namespace

Engine::Engine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Engine::~Engine() { Shutdown(); }

StatusOr<std::unique_ptr<Engine>> Engine::Create(const EngineConfig& config) {
  TERN_RETURN_IF_ERROR(ValidateConfig(config));
  auto impl = std::make_unique<Impl>();
  impl->config = config;
  TERN_ASSIGN_OR_RETURN(impl->model, Model::Load(config.model_path));
  const ModelConfig& mc = impl->model->config();
  {
    Vocab vocab;
    TERN_ASSIGN_OR_RETURN(vocab, Vocab::FromGguf(impl->model->file()));
    TERN_ASSIGN_OR_RETURN(impl->tokenizer, Tokenizer::Create(std::move(vocab)));
  }
  TERN_RETURN_IF_ERROR(
      CheckContextLength(mc, config.max_model_len, "--max-model-len", config.model_path));

  KvConfig shape;
  shape.num_layers = mc.n_layer;
  shape.num_kv_heads = mc.n_head_kv;
  shape.head_dim = mc.head_dim;
  shape.block_size = config.block_size;
  shape.dtype = config.kv_cache_dtype;
  shape.v_dtype = config.kv_cache_dtype_v;
  for (DType t : {shape.KDtype(), shape.VDtype()}) {
    TERN_RETURN_IF_ERROR(CheckKvRow(t, mc.n_head_kv, mc.head_dim).WithContext(config.model_path));
  }
  if (const std::string w = KvRowWarning(shape.KDtype(), mc.n_head_kv, mc.head_dim); !w.empty()) {
    TERN_LOG_WARN("%s", w.c_str());
  }
  KvBudget budget;
  budget.kv_cache_memory_bytes = config.kv_cache_memory_bytes;
  budget.memory_utilization = config.memory_utilization;
  for (const gguf::TensorInfo& t : impl->model->file().tensors()) {
    budget.weight_bytes += (int64_t)t.num_bytes;
  }
  budget.max_num_seqs = config.max_num_seqs;
  budget.max_model_len = config.max_model_len;
  budget.model_context_len = mc.n_ctx_train;
  TERN_ASSIGN_OR_RETURN(impl->kv_config, PlanKvCache(shape, budget));
  // Hybrid windowed models (gemma2, gemma3): the windowed layers get their
  // own blocks, released outside the window, the global layers keep theirs
  // (docs/engine.md "Sliding window"). Streaming eviction keeps one group.
  const int32_t windowed_layers = mc.sliding_window > 0 ? mc.NumWindowedLayers() : 0;
  if (windowed_layers > 0 && windowed_layers < mc.n_layer &&
      config.kv_eviction != KvEviction::kStreaming) {
    const int32_t chunk = config.enable_chunked_prefill ? config.max_num_batched_tokens
                                                        : impl->kv_config.max_model_len;
    impl->kv_config = SplitKvForWindow(impl->kv_config, windowed_layers, mc.sliding_window,
                                       chunk, config.max_num_seqs);
  }
  // Unsplit when the window holds a whole sequence (nothing to release).
  const bool hybrid = impl->kv_config.window_group_layers > 0;
  const KvConfig& kv = impl->kv_config;

  KvShape storage_shape;
  storage_shape.num_layers = kv.num_layers;
  storage_shape.num_kv_heads = kv.num_kv_heads;
  storage_shape.head_dim = kv.head_dim;
  storage_shape.block_size = kv.block_size;
  storage_shape.num_blocks = kv.num_blocks;
  storage_shape.dtype = kv.KDtype();
  storage_shape.v_dtype = kv.VDtype();
  storage_shape.huge_pages = config.kv_huge_pages;
  if (hybrid) {
    for (int32_t l = 0; l < mc.n_layer; ++l) {
      storage_shape.window_group_layers.push_back(mc.LayerIsWindowed(l));
    }
    storage_shape.window_group_blocks = kv.window_group_blocks;
  }
  impl->kv_storage = std::make_unique<KvStorage>(storage_shape);
  impl->stats.kv_cache_capacity_tokens = kv.num_tokens();
  // The KV cache's fixed shape, there from the start (not only after a step).
  impl->stats.num_kv_blocks = kv.num_blocks;
  impl->stats.num_kv_window_blocks = kv.window_group_blocks;
  impl->stats.block_size = kv.block_size;
  impl->stats.kv_cache_bytes = kv.TotalBytes();
  impl->stats.max_model_len = kv.max_model_len;
  impl->stats.max_num_seqs = config.max_num_seqs;
  impl->pool = std::make_unique<ThreadPool>(config.num_threads > 0 ? config.num_threads
                                                                   : ThreadPool::DefaultNumThreads());

  if (config.warmup) WarmUp(*impl->model, *impl->kv_storage, impl->pool.get());

  SchedulerConfig sc;
  sc.max_num_seqs = config.max_num_seqs;
  sc.max_num_batched_tokens = config.max_num_batched_tokens;
  sc.max_model_len = kv.max_model_len;
  sc.enable_chunked_prefill = config.enable_chunked_prefill;
  sc.max_num_partial_prefills = config.max_num_partial_prefills;
  sc.max_prefill_tokens_while_decoding = config.max_prefill_tokens_while_decoding;
  sc.policy = config.scheduling_policy;
  sc.target_itl_s = config.target_itl_ms / 1e3;
  sc.target_itl_factor = config.target_itl_factor;
  sc.eog_token_ids = impl->tokenizer->eog_ids();
  auto kv_manager = std::make_unique<KvCacheManager>((int32_t)kv.num_blocks, kv.block_size,
                                                     config.enable_prefix_caching);
  // Every layer windowed (mistral, phi3): old blocks go back while requests
  // run. A hybrid model (gemma): the windowed layers' group releases its
  // blocks, the global layers' keeps them.
  if (mc.sliding_window > 0 && windowed_layers == mc.n_layer) {
    kv_manager->SetSlidingWindow(mc.sliding_window);
  } else if (hybrid) {
    kv_manager->SetWindowGroup((int32_t)kv.window_group_blocks, mc.sliding_window,
                               mc.n_layer - windowed_layers, windowed_layers);
  }
  if (config.kv_eviction == KvEviction::kStreaming) {
    TERN_RETURN_IF_ERROR(SetUpStreamingEviction(config, kv, *kv_manager, sc));
  }
  std::unique_ptr<Proposer> proposer;
  if (config.speculative_method == SpecMethod::kNgram) {
    proposer = std::make_unique<NgramProposer>(config.ngram_min, config.ngram_max);
  } else if (config.speculative_method == SpecMethod::kDraft) {
    // The draft's KV holds as many tokens as the target's.
    TERN_ASSIGN_OR_RETURN(proposer, DraftModelProposer::Create(config.speculative_model,
                                                               impl->model->file(), kv.block_size,
                                                               kv.num_blocks, impl->pool.get(),
                                                               config.kv_huge_pages));
  }
  if (proposer) {
    sc.num_spec_tokens = config.num_speculative_tokens;
    sc.spec_adaptive = config.speculative_adaptive;
    if (sc.spec_adaptive) {
      // Up to the largest step speculation can make: every running request
      // verifying k proposals, within the step's budget.
      const int64_t most = std::min<int64_t>((int64_t)config.max_num_seqs * (1 + sc.num_spec_tokens),
                                             sc.max_num_batched_tokens);
      sc.spec_step_times = MeasureForwardTimes(*impl->model, *impl->kv_storage, kv.block_size,
                                               kv.num_blocks, (int32_t)most, impl->pool.get());
      impl->spec_step_times = sc.spec_step_times;
    }
  }
  auto scheduler = std::make_unique<Scheduler>(sc, std::move(kv_manager));
  auto runner = std::make_unique<ForwardModelRunner>(impl->model.get(), impl->kv_storage.get(),
                                                     impl->pool.get());
  impl->core = std::make_unique<EngineCore>(std::move(scheduler), std::move(runner),
                                            std::move(proposer), config.step_log_path);

  std::unique_ptr<Engine> engine(new Engine(std::move(impl)));
  Impl* raw = engine->impl_.get();
  raw->thread = std::thread([raw] { raw->Loop(); });
  return engine;
}

StatusOr<std::shared_ptr<OutputChannel>> Engine::AddRequest(EngineRequest request) {
  Impl& s = *impl_;
  const int32_t n_vocab = s.model->config().n_vocab;
  const int32_t max_len = s.kv_config.max_model_len;
  std::unique_lock<std::mutex> lock(s.mu);
  if (s.stopping) return Unavailable("engine is shut down");
  if (request.request_id.empty()) request.request_id = "req-" + std::to_string(s.next_request_number++);
  const std::string& id = request.request_id;
  if (s.channels.count(id)) return InvalidArgument("request " + id + ": duplicate request id");
  const std::vector<int32_t>& prompt = request.prompt_token_ids;
  if (prompt.empty()) return InvalidArgument("request " + id + ": empty prompt");
  for (size_t i = 0; i < prompt.size(); ++i) {
    if (prompt[i] < 0 || prompt[i] >= n_vocab) {
      return InvalidArgument("request " + id + ": prompt token " + std::to_string(i) + " is " +
                             std::to_string(prompt[i]) + ", outside the vocabulary [0, " +
                             std::to_string(n_vocab) + ")");
    }
  }
  TERN_RETURN_IF_ERROR(ValidateSampling(id, request.sampling));
  if (s.config.kv_eviction != KvEviction::kStreaming) {
    if (MaybeFieldError e = CheckContextRoom((int64_t)prompt.size(), request.sampling.max_tokens, max_len)) {
      return InvalidArgument("request " + id + ": " + e->problem);
    }
  }
  if (!request.sampling.has_seed) {
    request.sampling.seed = s.seed_rng();
    request.sampling.has_seed = true;
  }
  auto channel = std::make_shared<OutputChannel>();
  s.channels.emplace(id, channel);
  s.incoming.push_back(std::make_unique<Request>(id, std::move(request.prompt_token_ids),
                                                 std::move(request.sampling),
                                                 std::move(request.cache_salt), Clock::now()));
  lock.unlock();
  s.cv.notify_all();
  return channel;
}

void Engine::Abort(const std::string& request_id) {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->finishes.emplace_back(request_id, FinishReason::kAbort);
  }
  impl_->cv.notify_all();
}

void Engine::FinishWithStop(const std::string& request_id) {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->finishes.emplace_back(request_id, FinishReason::kStop);
  }
  impl_->cv.notify_all();
}

EngineStats Engine::GetStats() const {
  std::lock_guard<std::mutex> lock(impl_->stats_mu);
  return impl_->stats;
}

const ModelConfig& Engine::model_config() const { return impl_->model->config(); }
const Model& Engine::model() const { return *impl_->model; }
const Tokenizer& Engine::tokenizer() const { return *impl_->tokenizer; }
int Engine::num_threads() const { return impl_->pool->num_threads(); }
int32_t Engine::max_model_len() const { return impl_->kv_config.max_model_len; }
bool Engine::streaming_kv_eviction() const {
  return impl_->config.kv_eviction == KvEviction::kStreaming;
}
std::string Engine::KvSummary() const {
  std::string s = impl_->kv_config.Summary();
  const ModelConfig& mc = impl_->model->config();
  if (mc.NumWindowedLayers() == 0) return s;
  // One max_model_len sequence, naive vs windowed (see docs/engine.md).
  const KvConfig& kv = impl_->kv_config;
  const int64_t naive = kv.BytesPerToken() * kv.max_model_len;
  const int64_t windowed = WindowedKvBytes(kv.BytesPerToken(), kv.num_layers,
                                           mc.NumWindowedLayers(), mc.sliding_window,
                                           kv.max_model_len);
  s += "; sliding window " + std::to_string(mc.sliding_window) + " on " +
       std::to_string(mc.NumWindowedLayers()) + " of " + std::to_string(mc.n_layer) +
       " layers: a max_model_len sequence needs " + FormatBytes((double)naive) + " naive, " +
       FormatBytes((double)windowed) + " windowed; " +
       (mc.NumWindowedLayers() == mc.n_layer
            ? "blocks outside the window are released"
            : kv.window_group_layers > 0
                  ? "the windowed layers' own blocks outside the window are released, the "
                    "global layers keep theirs"
                  : "all blocks kept (global layers)");
  return s;
}

std::string Engine::SpeculativeSummary() const {
  const EngineConfig& c = impl_->config;
  if (c.speculative_method == SpecMethod::kNone) return "";
  std::string s = std::string("speculative decoding: ") + SpecMethodName(c.speculative_method);
  if (c.speculative_method == SpecMethod::kNgram) {
    s += " (n-grams " + std::to_string(c.ngram_max) + ".." + std::to_string(c.ngram_min) + ")";
  } else {
    s += " (draft " + c.speculative_model + ")";
  }
  s += ", k " + std::to_string(c.num_speculative_tokens) +
       (c.speculative_adaptive ? ", adaptive" : ", fixed k");
  if (!impl_->spec_step_times.empty()) {
    s += "; forward time measured at start-up:";
    for (const auto& [n, secs] : impl_->spec_step_times) {
      char buf[64];
      std::snprintf(buf, sizeof buf, " %d tok %.2f ms", n, secs * 1e3);
      s += buf;
    }
  }
  return s;
}

void Engine::Shutdown() {
  Impl& s = *impl_;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (s.stopped) return;
    s.stopping = true;
    s.stopped = true;
  }
  s.cv.notify_all();
  if (s.thread.joinable()) s.thread.join();
  s.AbortEverything();
}

void Engine::Impl::Loop() {
  Clock::time_point last_log = Clock::now();
  uint64_t last_generated = 0;
  while (true) {
    std::vector<std::unique_ptr<Request>> new_requests;
    std::vector<std::pair<std::string, FinishReason>> new_finishes;
    {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait_for(lock, std::chrono::seconds(1), [&] {
        return stopping || !incoming.empty() || !finishes.empty() || core->HasWork();
      });
      if (stopping) return;
      new_requests.swap(incoming);
      new_finishes.swap(finishes);
    }
    for (auto& r : new_requests) core->AddRequest(std::move(r));
    std::vector<RequestDelta> deltas;
    for (const auto& [id, reason] : new_finishes) {
      if (std::optional<RequestDelta> d = core->Finish(id, reason)) deltas.push_back(std::move(*d));
    }
    if (core->HasWork()) {
      std::vector<RequestDelta> step = core->Step();
      std::move(step.begin(), step.end(), std::back_inserter(deltas));
    }
    // Stats first: a consumer woken by its final output sees them.
    PublishStats();
    Deliver(deltas);

    if (config.verbose && Clock::now() - last_log >= std::chrono::seconds(5)) {
      const double secs = std::chrono::duration<double>(Clock::now() - last_log).count();
      EngineStats st;
      {
        std::lock_guard<std::mutex> lock(stats_mu);
        st = stats;
      }
      TERN_LOG_INFO("engine: running %d, waiting %d, KV %s, %.1f tok/s, preemptions %" PRIu64,
                    st.num_running, st.num_waiting, Percent(st.kv_cache_usage).c_str(),
                    (double)(st.generation_tokens_total - last_generated) / secs,
                    st.num_preemptions_total);
      last_generated = st.generation_tokens_total;
      last_log = Clock::now();
    }
  }
}

void Engine::Impl::Deliver(std::vector<RequestDelta>& deltas) {
  if (deltas.empty()) return;
  {
    std::lock_guard<std::mutex> lock(mu);
    for (RequestDelta& d : deltas) {
      auto it = channels.find(d.request_id);
      if (it == channels.end()) continue;
      const bool finished = d.output.finished;
      it->second->Push(std::move(d.output));
      if (finished) channels.erase(it);
    }
  }
  {
    std::lock_guard<std::mutex> lock(output_mu);
    ++output_generation;
  }
  output_cv.notify_all();
}

uint64_t Engine::WaitForOutputs(uint64_t seen, std::chrono::milliseconds timeout) const {
  std::unique_lock<std::mutex> lock(impl_->output_mu);
  impl_->output_cv.wait_for(lock, timeout,
                            [&] { return impl_->output_generation != seen; });
  return impl_->output_generation;
}

void Engine::Impl::PublishStats() {
  const Scheduler& sched = core->scheduler();
  const SchedulerStats& ss = sched.stats();
  std::lock_guard<std::mutex> lock(stats_mu);
  stats.num_running = sched.num_running();
  stats.num_waiting = sched.num_waiting();
  stats.kv_cache_usage = sched.kv().Usage();
  stats.peak_kv_cache_usage = core->peak_kv_cache_usage();
  stats.peak_kv_full_usage = core->peak_kv_full_usage();
  stats.peak_kv_window_usage = core->peak_kv_window_usage();
  stats.prompt_tokens_total = ss.prompt_tokens_total;
  stats.generation_tokens_total = ss.generation_tokens_total;
  stats.forced_tokens_total = ss.forced_tokens_total;
  stats.prefix_cache_queries_total = ss.prefix_cache_queries_total;
  stats.prefix_cache_hits_total = ss.prefix_cache_hits_total;
  stats.num_preemptions_total = ss.num_preemptions_total;
  stats.num_steps_total = ss.num_steps_total;
  stats.kv_evicted_tokens_total = sched.kv().num_evicted_tokens();
  stats.request_success_total = ss.request_success_total;
  stats.spec_num_drafts_total = ss.spec_num_drafts_total;
  stats.spec_num_draft_tokens_total = ss.spec_num_draft_tokens_total;
  stats.spec_num_accepted_tokens_total = ss.spec_num_accepted_tokens_total;
  stats.spec_accepted_per_position = ss.spec_accepted_per_position;
  stats.last_step_batch_size = core->last_step().batch_size;
  stats.last_step_num_tokens = core->last_step().num_scheduled_tokens;
  // The KV cache's fixed shape (num_kv_blocks ... max_num_seqs) was set
  // once, in Create.
  if (ss.num_steps_total != last_published_step) {
    last_published_step = ss.num_steps_total;
    stats.recent_steps.push_back(core->last_step());
    if (stats.recent_steps.size() > EngineStats::kRecentSteps) stats.recent_steps.pop_front();
  }
}

void Engine::Impl::AbortEverything() {
  // The loop has stopped: this thread owns the core now.
  std::vector<std::unique_ptr<Request>> pending;
  std::vector<std::string> ids;
  {
    std::lock_guard<std::mutex> lock(mu);
    pending.swap(incoming);
    for (const auto& [id, channel] : channels) ids.push_back(id);
  }
  for (auto& r : pending) core->AddRequest(std::move(r));
  std::vector<RequestDelta> deltas;
  for (const std::string& id : ids) {
    if (std::optional<RequestDelta> d = core->Finish(id, FinishReason::kAbort)) {
      deltas.push_back(std::move(*d));
    }
  }
  PublishStats();
  Deliver(deltas);
}

}  // namespace tern
