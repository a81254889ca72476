#include "base/env_settings.h"

#include <algorithm>
#include <cstdlib>

#include "base/log.h"

namespace tern {

EnvSettings EnvSettings::Read(const std::function<const char*(const char*)>& getenv) {
  EnvSettings s;
  auto get = [&](const char* name, bool listed = true) -> std::string {
    const char* v = getenv(name);
    if (v == nullptr || *v == 0) return "";
    if (listed) s.found.push_back(std::string(name) + "=" + v);
    return v;
  };
  s.step_log_path = get("TERN_STEP_LOG");
  if (const std::string spin = get("TERN_POOL_SPIN"); !spin.empty()) {
    s.pool_spin_us = std::max<int64_t>(0, std::atoll(spin.c_str()));
  }

  s.isa = get("TERN_ISA");
  s.weight_layout = get("TERN_WEIGHT_LAYOUT");

  // Memory and paths.
  s.kv_huge_pages = get("TERN_KV_HUGEPAGES") != "0";
  // Not listed: it changes where files are looked for, not how anything
  // runs, and test runs set it for every command (a line on each stderr).
  s.models_dir = get("TERN_MODELS_DIR", false);
  return s;
}

EnvSettings EnvSettings::FromProcess() {
  static const EnvSettings s = [] {
    EnvSettings read = Read([](const char* name) { return std::getenv(name); });
    if (!read.found.empty()) {
      std::string text;
      for (const std::string& f : read.found) text += (text.empty() ? "" : ", ") + f;
      TERN_LOG_INFO("settings from the environment: %s", text.c_str());
    }
    return read;
  }();
  return s;
}

}  // namespace tern
