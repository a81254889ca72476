// EngineBackend: the ServingBackend of `tern serve`, wrapping the real Engine
// (requests, stats) and its Tokenizer (text <-> ids, incremental
// detokenizing), plus the chat template (ChatPrompt, chat_prompt.h): the
// model's tokenizer.chat_template unless --chat-template names a built-in
// format or a file (ResolveChatTemplate).
//
// Thread rules: immutable after Create(); every method is safe from any
// thread (Engine and Tokenizer are).
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "engine/engine.h"
#include "grammar/constraint_cache.h"
#include "server/chat_prompt.h"
#include "server/serving_backend.h"

namespace tern {

class EngineBackend : public ServingBackend {
 public:
  // chat_template_source "" = none: chat requests get a 400 that says so.
  static StatusOr<std::unique_ptr<EngineBackend>> Create(std::unique_ptr<Engine> engine,
                                                         const std::string& chat_template_source);

  Engine& engine() { return *engine_; }
  bool has_chat_template() const { return chat_prompt_.has_value(); }

  StatusOr<std::shared_ptr<OutputChannel>> AddRequest(EngineRequest request) override;
  void Abort(const std::string& request_id) override;
  void FinishWithStop(const std::string& request_id) override;
  EngineStats GetStats() const override;
  uint64_t WaitForOutputs(uint64_t seen, std::chrono::milliseconds timeout) const override;
  int32_t max_model_len() const override;
  bool streaming_kv_eviction() const override;
  int32_t vocab_size() const override;
  std::vector<int32_t> Encode(std::string_view text, bool add_special,
                              bool parse_special) const override;
  std::string Decode(std::span<const int32_t> ids) const override;
  std::string TokenPiece(int32_t id) const override;
  std::unique_ptr<TokenTextStream> NewTextStream(
      std::span<const int32_t> prompt_ids) const override;
  StatusOr<std::vector<int32_t>> EncodeChat(const std::vector<ApiMessage>& messages,
                                            bool add_special) const override;
  StatusOr<std::vector<int32_t>> EncodeChatWithTools(const std::vector<ApiMessage>& messages,
                                                     const ToolsRequest& tools,
                                                     bool add_special) const override;
  ToolCallFormat tool_call_format() const override { return tool_call_format_; }
  // Built on first use (the token trie walks the whole vocabulary once).
  grammar::ConstraintCache* constraints() const override;

 private:
  explicit EngineBackend(std::unique_ptr<Engine> engine) : engine_(std::move(engine)) {}

  std::unique_ptr<Engine> engine_;
  std::optional<ChatPrompt> chat_prompt_;
  ToolCallFormat tool_call_format_ = ToolCallFormat::kHermes;
  mutable std::once_flag constraints_once_;
  mutable std::unique_ptr<grammar::ConstraintCache> constraints_;
};

}  // namespace tern
