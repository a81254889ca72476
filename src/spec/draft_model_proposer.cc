#include "spec/draft_model_proposer.h"

#include <algorithm>

#include "base/check.h"
#include "spec/verify.h"
#include "tokenizer/vocab.h"

namespace tern {

Status CheckSameVocabulary(const gguf::GgufFile& draft, const gguf::GgufFile& target,
                           const std::string& draft_path) {
  auto dv = Vocab::FromGguf(draft);
  if (!dv.ok()) return dv.status().WithContext(draft_path);
  auto tv = Vocab::FromGguf(target);
  if (!tv.ok()) return tv.status();
  const std::vector<std::string>& d = dv->tokens;
  const std::vector<std::string>& t = tv->tokens;
  const size_t n = std::min(d.size(), t.size());
  for (size_t i = 0; i < n; ++i) {
    if (d[i] != t[i]) {
      return InvalidArgument(draft_path + ": the draft's vocabulary differs from the target's at token id " +
                             std::to_string(i) + " (draft \"" + d[i] + "\", target \"" + t[i] +
                             "\"); speculative decoding needs the same vocabulary");
    }
  }
  if (d.size() != t.size()) {
    return InvalidArgument(draft_path + ": the draft's vocabulary has " + std::to_string(d.size()) +
                           " tokens, the target's " + std::to_string(t.size()) +
                           " (first differing id " + std::to_string(n) +
                           "); speculative decoding needs the same vocabulary");
  }
  return Status::Ok();
}

StatusOr<std::unique_ptr<DraftModelProposer>> DraftModelProposer::Create(
    const std::string& path, const gguf::GgufFile& target, int32_t block_size, int64_t num_blocks,
    ThreadPool* pool, bool huge_pages) {
  std::unique_ptr<DraftModelProposer> p(new DraftModelProposer());
  TERN_ASSIGN_OR_RETURN(p->model_, Model::Load(path));
  TERN_RETURN_IF_ERROR(CheckSameVocabulary(p->model_->file(), target, path));
  const ModelConfig& mc = p->model_->config();
  KvShape shape;
  shape.num_layers = mc.n_layer;
  shape.num_kv_heads = mc.n_head_kv;
  shape.head_dim = mc.head_dim;
  shape.block_size = block_size;
  shape.num_blocks = num_blocks;
  shape.dtype = DType::kF16;
  shape.huge_pages = huge_pages;
  if (!CheckKvRow(shape.dtype, mc.n_head_kv, mc.head_dim).ok()) shape.dtype = DType::kF32;
  p->storage_ = std::make_unique<KvStorage>(shape);
  p->kv_ = std::make_unique<KvCacheManager>((int32_t)num_blocks, block_size, false);
  p->pool_ = pool;
  return p;
}

void DraftModelProposer::Release(std::string_view request_id) {
  const std::string id(request_id);
  seen_.erase(id);
  kv_->Free(id);
}

void DraftModelProposer::Propose(std::span<ProposalRequest> requests) {
  struct Work {
    ProposalRequest* r;
    std::string id;
    std::vector<int32_t>* seen;
    std::vector<int32_t> feed;  // tokens to compute this round
    int32_t start = 0;          // position of feed[0]
    std::vector<int32_t> history;  // output so far + proposals (penalties)
  };
  std::vector<Work> work;
  const int32_t bs = kv_->block_size();
  for (ProposalRequest& r : requests) {
    r.proposals.clear();
    r.q.clear();
    const int32_t n = (int32_t)r.tokens.size();
    const int32_t k = r.max_proposals;
    if (k <= 0 || n == 0) continue;
    Work w;
    w.r = &r;
    w.id = std::string(r.request_id);
    std::vector<int32_t>& seen = seen_[w.id];
    // Keep the KV of the longest shared prefix, at most n - 1 tokens (the
    // last one is fed to get logits).
    size_t common = 0;
    const size_t limit = std::min<size_t>(seen.size(), n - 1);
    while (common < limit && seen[common] == r.tokens[common]) ++common;
    seen.resize(common);
    kv_->TruncateTo(w.id, (int32_t)common);
    // Slots for the unseen tokens and the k - 1 proposals fed back.
    if (!kv_->AllocateSlots(w.id, (int32_t)common, n - (int32_t)common + k - 1)) {
      Release(w.id);  // draft KV is short: no proposals for it this step
      continue;
    }
    w.seen = &seen;
    w.start = (int32_t)common;
    w.feed.assign(r.tokens.begin() + common, r.tokens.end());
    w.history.assign(r.tokens.begin() + std::min(r.num_prompt_tokens, n), r.tokens.end());
    work.push_back(std::move(w));
  }
  if (work.empty()) return;
  const int32_t n_vocab = model_->config().n_vocab;
  for (int32_t round = 0;; ++round) {
    ForwardBatch batch;
    std::vector<Work*> active;
    for (Work& w : work) {
      if (round >= w.r->max_proposals) continue;
      ForwardSequence seq;
      seq.first_token = batch.num_tokens();
      seq.num_tokens = (int32_t)w.feed.size();
      seq.context_len = w.start + seq.num_tokens;
      std::span<const int32_t> table = kv_->BlockTable(w.id);
      const int32_t num_blocks = (seq.context_len + bs - 1) / bs;
      CHECK_LE(num_blocks, (int32_t)table.size());
      seq.block_table.assign(table.begin(), table.begin() + num_blocks);
      for (int32_t i = 0; i < seq.num_tokens; ++i) {
        const int32_t pos = w.start + i;
        batch.token_ids.push_back(w.feed[i]);
        batch.positions.push_back(pos);
        batch.slots.push_back((int64_t)table[pos / bs] * bs + pos % bs);
      }
      batch.logits_rows.push_back(batch.num_tokens() - 1);
      batch.sequences.push_back(std::move(seq));
      active.push_back(&w);
    }
    if (active.empty()) break;
    logits_.resize((size_t)active.size() * n_vocab);
    model_->Forward(batch, *storage_, logits_.data(), pool_);
    num_tokens_computed_ += batch.num_tokens();
    for (size_t a = 0; a < active.size(); ++a) {
      Work& w = *active[a];
      std::span<const float> row(logits_.data() + a * n_vocab, n_vocab);
      const SamplingParams& params = *w.r->sampling;
      int32_t d;
      if (IsGreedy(params)) {
        std::vector<float> adjusted(row.begin(), row.end());
        ApplyPenalties(adjusted, params, w.history);
        d = Argmax(adjusted);
      } else {
        std::vector<TokenProb> q = TargetDistribution(row, params, w.history);
        d = DrawFrom(q, w.r->rng->Uniform());
        w.r->q.push_back(std::move(q));
      }
      w.seen->insert(w.seen->end(), w.feed.begin(), w.feed.end());
      w.start += (int32_t)w.feed.size();
      w.r->proposals.push_back(d);
      w.history.push_back(d);
      w.feed.assign(1, d);
    }
  }
}

}  // namespace tern
