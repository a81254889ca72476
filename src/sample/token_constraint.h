// TokenConstraint: the per-request logits-mask hook of the sampler. A
// constraint (a compiled grammar, src/grammar) says which tokens may come next;
// the model runner masks the request's logits before SampleToken, advances the
// constraint with the chosen token, and appends the tokens it forces
// (jump-forward: the only continuation, appended without sampling).
//
// TokenConstraint is immutable and shared by every request that uses it;
// each request owns one TokenConstraintState.
//
// Thread rules: NewState from any thread; a state is used by the engine
// thread only.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace tern {

class TokenConstraintState {
 public:
  virtual ~TokenConstraintState() = default;
  // Sets the logits of the tokens that may not come next to -inf (at least
  // one token stays). remaining_tokens: output tokens the request may still
  // produce, this one included; the mask keeps only tokens after which the
  // constraint can still be completed within the rest.
  virtual void MaskLogits(std::span<float> logits, int32_t remaining_tokens) = 0;
  // Advances past a chosen token.
  virtual void Accept(int32_t token) = 0;
  // The tokens that must follow (at most max_tokens), already accepted.
  virtual std::vector<int32_t> ForcedTokens(int32_t max_tokens) = 0;
  // Nothing may follow: the output is complete.
  virtual bool IsComplete() const = 0;
};

class TokenConstraint {
 public:
  virtual ~TokenConstraint() = default;
  virtual std::unique_ptr<TokenConstraintState> NewState() const = 0;
};

}  // namespace tern
