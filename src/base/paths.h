// Where the shared test data and the default model live.
#pragma once

#include <string>

namespace tern {

// configured (EnvSettings::models_dir, i.e. $TERN_MODELS_DIR) if not empty,
// else "<source dir>/../shared/models" (baked in at build time), else
// "../shared/models".
std::string ModelsDir(const std::string& configured);
// ModelsDir(EnvSettings::FromProcess().models_dir).
std::string ModelsDir();
// ModelsDir() + "/stories260K.gguf".
std::string DefaultModelPath();
bool FileExists(const std::string& path);

}  // namespace tern
