#include "base/env_settings.h"

#include <algorithm>
#include <cstdlib>
#include <mutex>

#include "base/log.h"

namespace tern {

EnvSettings EnvSettings::Read(const std::function<const char*(const char*)>& getenv) {
  EnvSettings s;
  auto get = [&](const char* name) -> std::string {
    const char* v = getenv(name);
    if (v == nullptr || *v == 0) return "";
    s.found.push_back(std::string(name) + "=" + v);
    return v;
  };
  s.step_log_path = get("TERN_STEP_LOG");
  if (const std::string spin = get("TERN_POOL_SPIN"); !spin.empty()) {
    s.pool_spin_us = std::max<int64_t>(0, std::atoll(spin.c_str()));
  }

  s.isa = get("TERN_ISA");

  return s;
}

EnvSettings EnvSettings::FromProcess() {
  EnvSettings s = Read([](const char* name) { return std::getenv(name); });
  static std::once_flag logged;
  std::call_once(logged, [&] {
    if (s.found.empty()) return;
    std::string text;
    for (const std::string& f : s.found) text += (text.empty() ? "" : ", ") + f;
    TERN_LOG_INFO("settings from the environment: %s", text.c_str());
  });
  return s;
}

}  // namespace tern
