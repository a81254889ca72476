// The OpenAI request fields tern does not implement, each answered one of two
// ways: accepted and ignored (listed in docs/server.md: they change nothing
// about the output, like `user` or `store`), or refused with a 400 that names
// the field (they would change the output, like `logit_bias`, and silently
// dropping them would hand the client something it did not ask for). Fields
// that are not OpenAI's at all stay ignored, as before.
//
// Thread rules: pure functions.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/api_error.h"
#include "server/completion_request.h"

namespace tern {

// The first unsupported field of the request, as a 400.
std::optional<ApiError> CheckUnsupportedFields(const nlohmann::json& obj, ApiEndpoint endpoint);

// The accepted-and-ignored fields of an endpoint (for docs and tests).
const std::vector<std::string>& IgnoredOpenAiFields(ApiEndpoint endpoint);

}  // namespace tern
