// HubConfig: where models are fetched from and kept. Read once from the
// environment (FromEnvironment) at the command's boundary; nothing below it
// reads the environment.
//
//   HF_ENDPOINT     the hub's base URL (default https://huggingface.co)
//   HF_TOKEN        sent as "Authorization: Bearer ..." (gated/private repos)
//   HF_HUB_OFFLINE  1/true/yes/on: never touch the network
//   TERN_CACHE      the cache folder (default $XDG_CACHE_HOME/tern, else
//                   ~/.cache/tern)
#pragma once

#include <functional>
#include <string>

#include "base/status.h"

namespace tern::hub {

inline constexpr const char* kDefaultEndpoint = "https://huggingface.co";

struct HubConfig {
  std::string endpoint = kDefaultEndpoint;  // no trailing '/'
  std::string token;                        // empty: anonymous
  std::string cache_dir;                    // empty: no usable home (error on use)
  bool offline = false;

  // getenv is a parameter so that tests can feed their own variables.
  static HubConfig FromEnvironment(const std::function<const char*(const char*)>& getenv);
  static HubConfig FromEnvironment();
};

}  // namespace tern::hub
