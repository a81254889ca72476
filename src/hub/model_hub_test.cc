// ModelHub without a server: listing parsing, checksum headers, and the cache
// paths that must never reach the network. The downloads themselves are
// tested end to end against a loopback hub in tests/pull_cli_test.cc.
#include "hub/model_hub.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

namespace tern::hub {
namespace {

namespace fs = std::filesystem;

// Nothing listens on port 1: any request fails with "cannot reach".
constexpr const char* kDeadEndpoint = "http://127.0.0.1:1";

class TempCache {
 public:
  TempCache() {
    std::string tmpl = (fs::temp_directory_path() / "tern_hub_XXXXXX").string();
    if (::mkdtemp(tmpl.data())) path_ = tmpl;
  }
  ~TempCache() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  void Write(const std::string& rel, const std::string& bytes) const {
    fs::create_directories(fs::path(path_ + "/" + rel).parent_path());
    std::ofstream(path_ + "/" + rel, std::ios::binary) << bytes;
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

HubConfig Config(const std::string& cache, bool offline) {
  HubConfig c;
  c.endpoint = kDeadEndpoint;
  c.cache_dir = cache;
  c.offline = offline;
  return c;
}

const char* kListing = R"({"id": "o/r", "siblings": [
  {"rfilename": "README.md", "size": 10},
  {"rfilename": "m-Q8_0.gguf", "size": 300,
   "lfs": {"sha256": "BA7816BF8F01CFEA414140DE5DAE2223B00361A396177A9CB410FF61F20015AD", "size": 300}},
  {"rfilename": "m-Q4_K_M.gguf", "lfs": {"sha256": "short", "size": 200}},
  {"rfilename": "../escape.gguf"},
  {"size": 5}
]})";

TEST(ModelHubTest, ParsesListingSizesAndChecksums) {
  StatusOr<std::vector<RepoFile>> files = ParseRepoListing(kListing, "o/r");
  ASSERT_TRUE(files.ok()) << files.status().message();
  ASSERT_EQ(files->size(), 3u);  // the '..' path and the nameless entry are dropped
  EXPECT_EQ((*files)[0].name, "README.md");
  EXPECT_EQ((*files)[0].size, 10);
  EXPECT_EQ((*files)[0].sha256, "");
  EXPECT_EQ((*files)[1].sha256,
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ((*files)[1].size, 300);
  EXPECT_EQ((*files)[2].sha256, "");  // not 64 hex digits
  EXPECT_EQ((*files)[2].size, 200);
}

TEST(ModelHubTest, BadListingNamesTheRepo) {
  for (const char* text : {"not json", "[1,2]", "{\"id\": \"o/r\"}"}) {
    StatusOr<std::vector<RepoFile>> files = ParseRepoListing(text, "o/r");
    ASSERT_FALSE(files.ok()) << text;
    EXPECT_NE(files.status().message().find("listing of o/r"), std::string::npos);
  }
}

TEST(ModelHubTest, ChecksumFromLinkedEtagOnAnyHopElseSha256Etag) {
  const std::string sha = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
  HttpResponse redirected;
  redirected.hops = {{{"x-linked-etag", "\"" + sha + "\""}, {"etag", "\"abc\""}},
                     {{"etag", "\"d41d8cd98f00b204e9800998ecf8427e\""}}};
  EXPECT_EQ(ChecksumFromHeaders(redirected), sha);
  HttpResponse direct;
  direct.hops = {{{"etag", "W/\"" + sha + "\""}}};
  EXPECT_EQ(ChecksumFromHeaders(direct), sha);
  HttpResponse git_blob;  // a non-LFS file: a 40-digit git hash
  git_blob.hops = {{{"etag", "\"0123456789abcdef0123456789abcdef01234567\""}}};
  EXPECT_EQ(ChecksumFromHeaders(git_blob), "");
}

TEST(ModelHubTest, CachedFileIsUsedWithoutNetwork) {
  TempCache cache;
  cache.Write("models/o/r/dir/m.gguf", "GGUF");
  ModelHub hub(Config(cache.path(), /*offline=*/false));
  StatusOr<std::string> path = hub.Fetch(*ParseModelSpec("o/r/dir/m.gguf"));
  ASSERT_TRUE(path.ok()) << path.status().message();
  EXPECT_EQ(*path, cache.path() + "/models/o/r/dir/m.gguf");
}

TEST(ModelHubTest, QuantSpecResolvesThroughTheCachedListing) {
  TempCache cache;
  cache.Write("listings/o/r.json", kListing);
  cache.Write("models/o/r/m-Q8_0.gguf", "GGUF");
  ModelHub hub(Config(cache.path(), /*offline=*/true));
  StatusOr<std::string> path = hub.Fetch(*ParseModelSpec("o/r:q8_0"));
  ASSERT_TRUE(path.ok()) << path.status().message();
  EXPECT_EQ(*path, cache.path() + "/models/o/r/m-Q8_0.gguf");
  // The default choice (Q4_K_M) is listed but not cached: offline says so.
  StatusOr<std::string> missing = hub.Fetch(*ParseModelSpec("o/r"));
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("o/r (m-Q4_K_M.gguf) is not in the cache"),
            std::string::npos)
      << missing.status().message();
  EXPECT_NE(missing.status().message().find("offline"), std::string::npos);
  // A tag the listing lacks: the listing's own answer.
  StatusOr<std::string> unknown = hub.Fetch(*ParseModelSpec("o/r:IQ1_S"));
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("o/r has no .gguf file matching 'IQ1_S'"),
            std::string::npos)
      << unknown.status().message();
}

TEST(ModelHubTest, PartialFileIsNotACachedFile) {
  TempCache cache;
  cache.Write("models/o/r/m.gguf.part", "GG");
  ModelHub hub(Config(cache.path(), /*offline=*/true));
  StatusOr<std::string> path = hub.Fetch(*ParseModelSpec("o/r/m.gguf"));
  ASSERT_FALSE(path.ok());
  EXPECT_NE(path.status().message().find("o/r/m.gguf is not in the cache"), std::string::npos)
      << path.status().message();
}

TEST(ModelHubTest, NoNetworkIsAClearError) {
  TempCache cache;
  ModelHub hub(Config(cache.path(), /*offline=*/false));
  StatusOr<std::string> path = hub.Fetch(*ParseModelSpec("o/r:Q4_0"));
  ASSERT_FALSE(path.ok());
  EXPECT_NE(path.status().message().find("cannot reach http://127.0.0.1:1"), std::string::npos)
      << path.status().message();
  EXPECT_NE(path.status().message().find("--offline"), std::string::npos);
}

TEST(ModelHubTest, NoCacheFolderIsAClearError) {
  ModelHub hub(Config("", /*offline=*/true));
  StatusOr<std::string> path = hub.Fetch(*ParseModelSpec("o/r"));
  ASSERT_FALSE(path.ok());
  EXPECT_NE(path.status().message().find("TERN_CACHE"), std::string::npos);
}

}  // namespace
}  // namespace tern::hub
