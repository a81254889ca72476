#include "hub/hub_config.h"

#include <gtest/gtest.h>

#include <map>

namespace tern::hub {
namespace {

HubConfig FromMap(const std::map<std::string, std::string>& env) {
  return HubConfig::FromEnvironment([&env](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

TEST(HubConfigTest, DefaultsFollowHomeAndHuggingFace) {
  HubConfig c = FromMap({{"HOME", "/home/u"}});
  EXPECT_EQ(c.endpoint, "https://huggingface.co");
  EXPECT_EQ(c.cache_dir, "/home/u/.cache/tern");
  EXPECT_EQ(c.token, "");
  EXPECT_FALSE(c.offline);
}

TEST(HubConfigTest, XdgCacheHomeThenTernCacheWin) {
  EXPECT_EQ(FromMap({{"HOME", "/h"}, {"XDG_CACHE_HOME", "/x"}}).cache_dir, "/x/tern");
  EXPECT_EQ(FromMap({{"HOME", "/h"}, {"XDG_CACHE_HOME", "/x"}, {"TERN_CACHE", "/t"}}).cache_dir,
            "/t");
  EXPECT_EQ(FromMap({}).cache_dir, "");
}

TEST(HubConfigTest, EndpointTokenOffline) {
  HubConfig c = FromMap({{"HF_ENDPOINT", "http://127.0.0.1:9/"},
                         {"HF_TOKEN", "hf_abc"},
                         {"HF_HUB_OFFLINE", "TRUE"}});
  EXPECT_EQ(c.endpoint, "http://127.0.0.1:9");
  EXPECT_EQ(c.token, "hf_abc");
  EXPECT_TRUE(c.offline);
  EXPECT_FALSE(FromMap({{"HF_HUB_OFFLINE", "0"}}).offline);
  EXPECT_TRUE(FromMap({{"HF_HUB_OFFLINE", "1"}}).offline);
}

}  // namespace
}  // namespace tern::hub
