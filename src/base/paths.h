// Where the shared test data and the default model live.
#pragma once

#include <string>

namespace tern {

// $TERN_MODELS_DIR if set, else "<source dir>/../shared/models" (baked in at
// build time), else "../shared/models".
std::string ModelsDir();
// ModelsDir() + "/stories260K.gguf".
std::string DefaultModelPath();
bool FileExists(const std::string& path);

}  // namespace tern
