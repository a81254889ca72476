#include "server/engine_backend.h"

#include "server/structured_output.h"

#include "tokenizer/incremental_detokenizer.h"
#include "tokenizer/tokenizer.h"

namespace tern {
namespace {

class DetokenizerStream : public TokenTextStream {
 public:
  DetokenizerStream(const Tokenizer& tokenizer, std::span<const int32_t> prompt_ids)
      : detok_(tokenizer, /*skip_special=*/true) {
    for (int32_t id : prompt_ids) detok_.Add(id);
    (void)detok_.Flush();  // a prompt ending inside a character: not ours to print
  }
  std::string Add(int32_t id) override { return detok_.Add(id); }
  std::string Flush() override { return detok_.Flush(); }

 private:
  IncrementalDetokenizer detok_;
};

}  // namespace

StatusOr<std::unique_ptr<EngineBackend>> EngineBackend::Create(
    std::unique_ptr<Engine> engine, const std::string& chat_template_source) {
  std::unique_ptr<EngineBackend> b(new EngineBackend(std::move(engine)));
  if (!chat_template_source.empty()) {
    StatusOr<ChatPrompt> p = ChatPrompt::Create(b->engine_->tokenizer(), chat_template_source);
    if (!p.ok()) return p.status();
    b->chat_prompt_ = std::move(p).value();
    b->tool_call_format_ = DetectToolCallFormat(chat_template_source);
  }
  return b;
}

StatusOr<std::shared_ptr<OutputChannel>> EngineBackend::AddRequest(EngineRequest request) {
  return engine_->AddRequest(std::move(request));
}

void EngineBackend::Abort(const std::string& request_id) { engine_->Abort(request_id); }

void EngineBackend::FinishWithStop(const std::string& request_id) {
  engine_->FinishWithStop(request_id);
}

EngineStats EngineBackend::GetStats() const { return engine_->GetStats(); }

uint64_t EngineBackend::WaitForOutputs(uint64_t seen, std::chrono::milliseconds timeout) const {
  return engine_->WaitForOutputs(seen, timeout);
}

int32_t EngineBackend::max_model_len() const { return engine_->max_model_len(); }

bool EngineBackend::streaming_kv_eviction() const { return engine_->streaming_kv_eviction(); }

int32_t EngineBackend::vocab_size() const { return engine_->tokenizer().vocab_size(); }

std::vector<int32_t> EngineBackend::Encode(std::string_view text, bool add_special,
                                           bool parse_special) const {
  return engine_->tokenizer().Encode(text, add_special, parse_special);
}

std::string EngineBackend::Decode(std::span<const int32_t> ids) const {
  return engine_->tokenizer().Decode(ids);
}

std::string EngineBackend::TokenPiece(int32_t id) const {
  const Tokenizer& tok = engine_->tokenizer();
  if (!tok.IsValid(id) || tok.IsEog(id)) return "";
  return tok.TokenToPiece(id, /*skip_special=*/true);
}

grammar::ConstraintCache* EngineBackend::constraints() const {
  std::call_once(constraints_once_, [this] {
    constraints_ = std::make_unique<grammar::ConstraintCache>(TokenTrieFor(engine_->tokenizer()));
  });
  return constraints_.get();
}

std::unique_ptr<TokenTextStream> EngineBackend::NewTextStream(
    std::span<const int32_t> prompt_ids) const {
  return std::make_unique<DetokenizerStream>(engine_->tokenizer(), prompt_ids);
}

StatusOr<std::vector<int32_t>> EngineBackend::EncodeChat(const std::vector<ApiMessage>& messages,
                                                         bool add_special) const {
  if (!chat_prompt_) {
    return InvalidArgument(
        "this model has no chat template (no tokenizer.chat_template in its GGUF); start the "
        "server with --chat-template NAME|FILE, or use /v1/completions");
  }
  return EncodeChatWithTools(messages, ToolsRequest{}, add_special);
}

StatusOr<std::vector<int32_t>> EngineBackend::EncodeChatWithTools(
    const std::vector<ApiMessage>& messages, const ToolsRequest& tools, bool add_special) const {
  if (!chat_prompt_) return EncodeChat(messages, add_special);
  std::vector<ChatMessage> chat;
  chat.reserve(messages.size());
  for (const ApiMessage& m : messages) chat.push_back({m.role, m.content, MessageExtras(m)});
  return chat_prompt_->Encode(chat, add_special, ToolsValue(tools));
}

}  // namespace tern
