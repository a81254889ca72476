// DraftModelProposer: proposals from a small model that shares the target's
// vocabulary (checked token by token at start-up). The draft has its own
// paged KV (its own block pool and storage) and runs batched: each of the k
// proposal rounds is one Model::Forward over every speculating sequence.
//
//   round 1: each sequence feeds what the draft has not seen yet (its whole
//            prompt the first time, then the tokens accepted since) -> d1
//   round j: each feeds d_{j-1} -> d_j
//
// The draft remembers, per request, the tokens whose KV it holds; the next
// call keeps the longest prefix they share with the request's tokens (the
// accepted proposals) and truncates the rest (the rejected ones), so it
// needs no notice of what the target accepted. Greedy requests get the
// draft's argmax; sampling requests a draw from the draft's distribution
// after the same sampling parameters, with that distribution as q.
//
// Thread rules: the engine thread only.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "base/thread_pool.h"
#include "kv/kv_cache_manager.h"
#include "kv/kv_storage.h"
#include "model/model.h"
#include "spec/proposer.h"

namespace tern {

class DraftModelProposer : public Proposer {
 public:
  // Loads the draft at path and checks its vocabulary against the target's
  // file (an error names the first differing token id). Its KV holds
  // num_blocks blocks of block_size tokens (in 2 MiB pages when
  // huge_pages, as the target's). pool is borrowed.
  static StatusOr<std::unique_ptr<DraftModelProposer>> Create(const std::string& path,
                                                              const gguf::GgufFile& target,
                                                              int32_t block_size,
                                                              int64_t num_blocks,
                                                              ThreadPool* pool,
                                                              bool huge_pages = true);

  SpecMethod method() const override { return SpecMethod::kDraft; }
  void Propose(std::span<ProposalRequest> requests) override;
  void Release(std::string_view request_id) override;

  const Model& model() const { return *model_; }
  // Draft tokens computed so far (prefill and proposal rounds).
  int64_t num_tokens_computed() const { return num_tokens_computed_; }

 private:
  DraftModelProposer() = default;

  std::unique_ptr<Model> model_;
  std::unique_ptr<KvCacheManager> kv_;
  std::unique_ptr<KvStorage> storage_;
  ThreadPool* pool_ = nullptr;
  int64_t num_tokens_computed_ = 0;
  // Per request: the tokens whose KV the draft holds (positions 0..size-1).
  std::unordered_map<std::string, std::vector<int32_t>> seen_;
  std::vector<float> logits_;
};

// OK when the two files' vocabularies are the same token for token (and the
// models' n_vocab agree); else an error naming the first differing id.
Status CheckSameVocabulary(const gguf::GgufFile& draft, const gguf::GgufFile& target,
                           const std::string& draft_path);

}  // namespace tern
