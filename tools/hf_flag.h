// -hf/--hf-repo SPEC: a model named by its Hugging Face repo instead of a
// path. Registered by AddModelFlag for every command that takes -m; after
// parsing, a check fetches the model (or finds it in the cache, see
// src/hub/model_hub.h) and stores its local path where -m would have.
#pragma once

#include <string>

#include "tools/arg_parser.h"

namespace tern {

void AddHfRepoFlag(ArgParser& parser, std::string* model_path);

}  // namespace tern
