// ServingBackend: what the API server needs from the engine and its
// tokenizer, as one narrow interface. EngineBackend (engine_backend.h) wraps
// the real Engine; tests use a fake, so routing, streaming and validation are
// tested without a model or a socket.
//
// Thread rules: every method may be called from any HTTP thread at once.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "engine/engine.h"
#include "server/completion_request.h"
#include "server/tool_calls.h"

namespace tern {

namespace grammar {
class ConstraintCache;
}

// Generated ids -> text for one choice, whole UTF-8 characters at a time.
class TokenTextStream {
 public:
  virtual ~TokenTextStream() = default;
  virtual std::string Add(int32_t id) = 0;
  // The held-back tail (the stream ended inside a character).
  virtual std::string Flush() = 0;
};

class ServingBackend {
 public:
  virtual ~ServingBackend() = default;

  virtual StatusOr<std::shared_ptr<OutputChannel>> AddRequest(EngineRequest request) = 0;
  virtual void Abort(const std::string& request_id) = 0;
  // Finishes the request with reason "stop" (a stop string was seen).
  virtual void FinishWithStop(const std::string& request_id) = 0;
  virtual EngineStats GetStats() const = 0;
  // Blocks until outputs were delivered (to any request) after generation
  // `seen`, or the timeout passes; returns the current generation
  // (Engine::WaitForOutputs). Read it, drain the channels, wait on it: no
  // output is missed and nothing polls.
  virtual uint64_t WaitForOutputs(uint64_t seen, std::chrono::milliseconds timeout) const = 0;

  virtual int32_t max_model_len() const = 0;
  // Streaming KV eviction: requests may run past max_model_len (their
  // earlier context is dropped), so lengths are not checked against it.
  virtual bool streaming_kv_eviction() const { return false; }
  virtual int32_t vocab_size() const = 0;

  // Text -> ids. add_special: BOS as the vocabulary asks.
  virtual std::vector<int32_t> Encode(std::string_view text, bool add_special,
                                      bool parse_special) const = 0;
  virtual std::string Decode(std::span<const int32_t> ids) const = 0;
  // Raw bytes of one token (may be part of a UTF-8 character); "" for
  // end-of-generation and control tokens. Used for logprobs.
  virtual std::string TokenPiece(int32_t id) const = 0;
  // A detokenizer for the text generated after prompt_ids (the prompt gives
  // the first generated piece its leading-space context); special tokens
  // produce no text.
  virtual std::unique_ptr<TokenTextStream> NewTextStream(
      std::span<const int32_t> prompt_ids) const = 0;
  // Chat messages -> prompt ids through the chat template (with the
  // generation prompt). InvalidArgument when the model has no template.
  virtual StatusOr<std::vector<int32_t>> EncodeChat(const std::vector<ApiMessage>& messages,
                                                    bool add_special) const = 0;
  // EncodeChat with the request's tools for the template (none: EncodeChat).
  virtual StatusOr<std::vector<int32_t>> EncodeChatWithTools(const std::vector<ApiMessage>& messages,
                                                             const ToolsRequest& tools,
                                                             bool add_special) const {
    if (!tools.tools_json.empty()) return InvalidArgument("tools are not supported by this server");
    return EncodeChat(messages, add_special);
  }
  // How the chat template writes tool calls (tool_calls.h).
  virtual ToolCallFormat tool_call_format() const { return ToolCallFormat::kHermes; }
  // Structured outputs compiled over this vocabulary (null: not supported).
  virtual grammar::ConstraintCache* constraints() const { return nullptr; }
};

}  // namespace tern
