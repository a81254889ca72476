#include "hub/hub_config.h"

#include <cctype>
#include <cstdlib>

namespace tern::hub {
namespace {

std::string Get(const std::function<const char*(const char*)>& getenv, const char* name) {
  const char* v = getenv(name);
  return v ? v : "";
}

bool IsTrue(std::string v) {
  for (char& c : v) c = (char)std::tolower((unsigned char)c);
  return v == "1" || v == "true" || v == "yes" || v == "on";
}

}  // namespace

HubConfig HubConfig::FromEnvironment(const std::function<const char*(const char*)>& getenv) {
  HubConfig c;
  if (std::string e = Get(getenv, "HF_ENDPOINT"); !e.empty()) {
    while (!e.empty() && e.back() == '/') e.pop_back();
    c.endpoint = e;
  }
  c.token = Get(getenv, "HF_TOKEN");
  c.offline = IsTrue(Get(getenv, "HF_HUB_OFFLINE"));
  if (std::string dir = Get(getenv, "TERN_CACHE"); !dir.empty()) {
    c.cache_dir = dir;
  } else if (std::string xdg = Get(getenv, "XDG_CACHE_HOME"); !xdg.empty()) {
    c.cache_dir = xdg + "/tern";
  } else if (std::string home = Get(getenv, "HOME"); !home.empty()) {
    c.cache_dir = home + "/.cache/tern";
  }
  return c;
}

HubConfig HubConfig::FromEnvironment() {
  return FromEnvironment([](const char* name) { return std::getenv(name); });
}

}  // namespace tern::hub
