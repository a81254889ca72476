#include "base/paths.h"

#include <sys/stat.h>

#include "base/env_settings.h"

namespace tern {

bool FileExists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

std::string ModelsDir(const std::string& configured) {
  if (!configured.empty()) return configured;
#ifdef TERN_SOURCE_DIR
  std::string baked = std::string(TERN_SOURCE_DIR) + "/../shared/models";
  if (FileExists(baked)) return baked;
#endif
  return "../shared/models";
}

std::string ModelsDir() { return ModelsDir(EnvSettings::FromProcess().models_dir); }

std::string DefaultModelPath() { return ModelsDir() + "/stories260K.gguf"; }

}  // namespace tern
