#include "base/paths.h"

#include <cstdlib>
#include <sys/stat.h>

namespace tern {

bool FileExists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

std::string ModelsDir() {
  if (const char* env = std::getenv("TERN_MODELS_DIR"); env && *env) return env;
#ifdef TERN_SOURCE_DIR
  std::string baked = std::string(TERN_SOURCE_DIR) + "/../shared/models";
  if (FileExists(baked)) return baked;
#endif
  return "../shared/models";
}

std::string DefaultModelPath() { return ModelsDir() + "/stories260K.gguf"; }

}  // namespace tern
