// End-to-end tests of `tern pull` and `-hf`, against tests/fake_hub.py: a
// loopback server with the hub's URL layout, Range support, checksum headers
// and injectable faults (cut connections, wrong bytes, 404, 401). HF_ENDPOINT
// points at it and TERN_CACHE at a fresh folder; nothing leaves the machine.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>
#include <vector>

#include "base/paths.h"
#include "hub/sha256.h"
#include "tests/cli_util.h"

namespace tern {
namespace {

namespace fs = std::filesystem;
using testing::CliResult;
using testing::ReadFileBytes;
using testing::RunTern;
using testing::ShellQuote;
using testing::TempDir;
using testing::WriteFileBytes;

constexpr int kFileBytes = 300000;

std::string TestBytes(int n, int seed) {
  std::string bytes(n, '\0');
  uint32_t x = 2463534242u + (uint32_t)seed;
  for (char& c : bytes) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    c = (char)(x >> 24);
  }
  return bytes;
}

class PullCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (testing::TernBinary().empty()) GTEST_SKIP() << "TERN_BINARY not set (run through ctest)";
    if (std::system("command -v python3 >/dev/null 2>&1") != 0) {
      GTEST_SKIP() << "python3 missing (the fake hub needs it)";
    }
    ASSERT_FALSE(dir_.path().empty());
    fs::create_directories(Root());
    ASSERT_TRUE(WriteFileBytes(dir_.File("faults.json"), "{}"));
    StartServer();
    ::setenv("HF_ENDPOINT", ("http://127.0.0.1:" + port_).c_str(), 1);
    ::setenv("TERN_CACHE", Cache().c_str(), 1);
    ::unsetenv("HF_TOKEN");
    ::unsetenv("HF_HUB_OFFLINE");
  }

  void TearDown() override {
    StopServer();
    ::unsetenv("HF_ENDPOINT");
    ::unsetenv("TERN_CACHE");
    ::unsetenv("HF_TOKEN");
    ::unsetenv("HF_HUB_OFFLINE");
  }

  void StartServer() {
    const std::string script = std::string(TERN_TESTS_DIR) + "/fake_hub.py";
    const std::string root = Root(), log = dir_.File("requests.jsonl"),
                      faults = dir_.File("faults.json"), port_file = dir_.File("port");
    server_pid_ = ::fork();
    if (server_pid_ == 0) {
      ::execlp("python3", "python3", script.c_str(), "--root", root.c_str(), "--log", log.c_str(),
               "--faults", faults.c_str(), "--port-file", port_file.c_str(), (char*)nullptr);
      ::_exit(127);
    }
    ASSERT_GT(server_pid_, 0);
    // A wait for start-up, not a timing assertion: generous.
    for (int i = 0; i < 3000 && !fs::exists(port_file); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ASSERT_TRUE(fs::exists(port_file)) << "fake hub did not start";
    port_ = ReadFileBytes(port_file);
  }

  void StopServer() {
    if (server_pid_ <= 0) return;
    ::kill(server_pid_, SIGTERM);
    ::waitpid(server_pid_, nullptr, 0);
    server_pid_ = -1;
  }

  std::string Root() const { return dir_.File("hub"); }
  std::string Cache() const { return dir_.File("cache"); }
  std::string CachePath(const std::string& rel) const { return Cache() + "/models/" + rel; }

  // Puts a file into the fake hub at ORG/REPO/PATH.
  void Put(const std::string& rel, const std::string& bytes) {
    fs::create_directories(fs::path(Root() + "/" + rel).parent_path());
    ASSERT_TRUE(WriteFileBytes(Root() + "/" + rel, bytes));
  }
  void SetFaults(const std::string& json_text) {
    ASSERT_TRUE(WriteFileBytes(dir_.File("faults.json"), json_text));
  }

  // The requests the fake hub saw, in order.
  std::vector<nlohmann::json> Requests() const {
    std::vector<nlohmann::json> out;
    std::istringstream in(ReadFileBytes(dir_.File("requests.jsonl")));
    for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
    return out;
  }
  // The GETs of one repo file.
  std::vector<nlohmann::json> FileGets(const std::string& repo_path) const {
    std::vector<nlohmann::json> out;
    for (const nlohmann::json& r : Requests()) {
      const std::string path = r["path"];
      const size_t slash = repo_path.find('/', repo_path.find('/') + 1);
      const std::string expect =
          "/" + repo_path.substr(0, slash) + "/resolve/main/" + repo_path.substr(slash + 1);
      if (r["method"] == "GET" && path == expect) out.push_back(r);
    }
    return out;
  }

  TempDir dir_;
  pid_t server_pid_ = -1;
  std::string port_;
};

void ExpectError(const CliResult& r, const std::string& needle) {
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
}

TEST_F(PullCliTest, FreshDownloadPrintsThePathAndKeepsTheBytes) {
  const std::string bytes = TestBytes(kFileBytes, 1);
  Put("org/repo/dir/model-Q8_0.gguf", bytes);
  const CliResult r = RunTern("pull org/repo/dir/model-Q8_0.gguf");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string path = CachePath("org/repo/dir/model-Q8_0.gguf");
  EXPECT_EQ(r.out, path + "\n");
  EXPECT_EQ(ReadFileBytes(path), bytes);
  EXPECT_FALSE(fs::exists(path + ".part"));
  const std::vector<nlohmann::json> gets = FileGets("org/repo/dir/model-Q8_0.gguf");
  ASSERT_EQ(gets.size(), 1u);
  EXPECT_TRUE(gets[0]["range"].is_null()) << gets[0];
  EXPECT_TRUE(gets[0]["authorization"].is_null()) << gets[0];  // no HF_TOKEN, no header
  EXPECT_NE(r.err.find("downloading org/repo/dir/model-Q8_0.gguf"), std::string::npos) << r.err;
}

TEST_F(PullCliTest, ResumesACutTransferWithARangeRequest) {
  const std::string bytes = TestBytes(kFileBytes, 2);
  Put("org/repo/m.gguf", bytes);
  SetFaults(R"({"files": {"org/repo/m.gguf": {"cut_after": 100000, "cut_times": 1}}})");
  const CliResult r = RunTern("pull org/repo/m.gguf");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(ReadFileBytes(CachePath("org/repo/m.gguf")), bytes);
  const std::vector<nlohmann::json> gets = FileGets("org/repo/m.gguf");
  ASSERT_EQ(gets.size(), 2u);
  EXPECT_TRUE(gets[0]["range"].is_null());
  EXPECT_EQ(gets[1]["range"], "bytes=100000-");
  EXPECT_NE(r.err.find("interrupted"), std::string::npos) << r.err;
}

TEST_F(PullCliTest, KeepsThePartFileAndResumesOnTheNextRun) {
  const std::string bytes = TestBytes(kFileBytes, 3);
  Put("org/repo/m.gguf", bytes);
  SetFaults(R"({"files": {"org/repo/m.gguf": {"cut_after": 1000}}})");
  const CliResult cut = RunTern("pull org/repo/m.gguf");
  ExpectError(cut, "interrupted");
  EXPECT_NE(cut.err.find("run the command again to resume"), std::string::npos) << cut.err;
  const std::string part = CachePath("org/repo/m.gguf.part");
  ASSERT_TRUE(fs::exists(part));
  const int64_t kept = (int64_t)fs::file_size(part);
  EXPECT_GT(kept, 0);
  EXPECT_LT(kept, kFileBytes);
  EXPECT_EQ(ReadFileBytes(part), bytes.substr(0, kept));
  EXPECT_FALSE(fs::exists(CachePath("org/repo/m.gguf")));

  SetFaults("{}");
  const size_t gets_before = FileGets("org/repo/m.gguf").size();
  const CliResult r = RunTern("pull org/repo/m.gguf");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<nlohmann::json> gets = FileGets("org/repo/m.gguf");
  ASSERT_EQ(gets.size(), gets_before + 1);
  EXPECT_EQ(gets.back()["range"], "bytes=" + std::to_string(kept) + "-");
  EXPECT_EQ(ReadFileBytes(CachePath("org/repo/m.gguf")), bytes);
  EXPECT_FALSE(fs::exists(part));
}

TEST_F(PullCliTest, ChecksumMismatchLeavesNoFile) {
  Put("org/repo/m.gguf", TestBytes(kFileBytes, 4));
  SetFaults(R"({"files": {"org/repo/m.gguf": {"corrupt": true}}})");
  const CliResult r = RunTern("pull org/repo/m.gguf");
  ExpectError(r, "checksum mismatch for org/repo/m.gguf");
  EXPECT_NE(r.err.find("the download was deleted"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(CachePath("org/repo/m.gguf")));
  EXPECT_FALSE(fs::exists(CachePath("org/repo/m.gguf.part")));
}

TEST_F(PullCliTest, CachedModelIsUsedWithoutTheNetwork) {
  const std::string bytes = TestBytes(kFileBytes, 5);
  Put("org/repo/model-Q4_K_M.gguf", bytes);
  Put("org/repo/model-Q8_0.gguf", TestBytes(1000, 6));
  ASSERT_EQ(RunTern("pull org/repo:q4_k_m").exit_code, 0);
  const size_t requests = Requests().size();
  const std::string path = CachePath("org/repo/model-Q4_K_M.gguf");
  // Online, but a cached spec makes no request.
  for (const char* spec : {"org/repo/model-Q4_K_M.gguf", "org/repo:Q4_K_M", "org/repo"}) {
    const CliResult r = RunTern(std::string("pull ") + spec);
    ASSERT_EQ(r.exit_code, 0) << spec << ": " << r.err;
    EXPECT_EQ(r.out, path + "\n") << spec;
  }
  EXPECT_EQ(Requests().size(), requests);
  // With the hub gone too, plain, --offline and HF_HUB_OFFLINE.
  StopServer();
  EXPECT_EQ(RunTern("pull org/repo:Q4_K_M").out, path + "\n");
  EXPECT_EQ(RunTern("pull org/repo/model-Q4_K_M.gguf --offline").out, path + "\n");
  ::setenv("HF_HUB_OFFLINE", "1", 1);
  EXPECT_EQ(RunTern("pull org/repo:q4_k_m").out, path + "\n");
  // Listed but never downloaded: offline says it is not cached.
  ExpectError(RunTern("pull org/repo:Q8_0"), "org/repo:Q8_0 (model-Q8_0.gguf) is not in the cache");
  ::unsetenv("HF_HUB_OFFLINE");
  ExpectError(RunTern("pull org/repo:Q8_0"), "cannot reach http://127.0.0.1:" + port_);
}

TEST_F(PullCliTest, QuantTagChoosesTheFile) {
  Put("org/repo/README.md", "# readme");
  Put("org/repo/model-Q8_0.gguf", TestBytes(2000, 7));
  Put("org/repo/model-Q4_K_S.gguf", TestBytes(1500, 8));
  Put("org/repo/model-Q4_K_M.gguf", TestBytes(1700, 9));
  const CliResult q8 = RunTern("pull org/repo:q8_0");
  ASSERT_EQ(q8.exit_code, 0) << q8.err;
  EXPECT_EQ(q8.out, CachePath("org/repo/model-Q8_0.gguf") + "\n");
  EXPECT_EQ(ReadFileBytes(CachePath("org/repo/model-Q8_0.gguf")), TestBytes(2000, 7));
  const CliResult by_default = RunTern("pull org/repo");
  ASSERT_EQ(by_default.exit_code, 0) << by_default.err;
  EXPECT_EQ(by_default.out, CachePath("org/repo/model-Q4_K_M.gguf") + "\n");
  const CliResult missing = RunTern("pull org/repo:IQ2_XS");
  ExpectError(missing, "org/repo has no .gguf file matching 'IQ2_XS'");
  EXPECT_NE(missing.err.find("model-Q4_K_S.gguf"), std::string::npos) << missing.err;
}

TEST_F(PullCliTest, NotFoundNamesTheRepoOrFile) {
  Put("org/repo/m.gguf", TestBytes(100, 10));
  ExpectError(RunTern("pull org/missing:Q4_0"), "repository org/missing not found");
  ExpectError(RunTern("pull org/repo/nope.gguf"), "file 'nope.gguf' not found in org/repo");
  SetFaults(R"({"files": {"org/repo/m.gguf": {"status": 404}}})");
  ExpectError(RunTern("pull org/repo/m.gguf"), "file 'm.gguf' not found in org/repo (HTTP 404)");
  EXPECT_FALSE(fs::exists(CachePath("org/repo/m.gguf.part")));  // nothing to resume
  EXPECT_FALSE(fs::exists(CachePath("org/repo/m.gguf")));
}

TEST_F(PullCliTest, UnauthorizedAndForbiddenMentionTheToken) {
  Put("org/gated/m.gguf", TestBytes(100, 11));
  SetFaults(R"({"repos": {"org/gated": 401}})");
  const CliResult r401 = RunTern("pull org/gated/m.gguf");
  ExpectError(r401, "org/gated: unauthorized (HTTP 401)");
  EXPECT_NE(r401.err.find("set HF_TOKEN"), std::string::npos) << r401.err;
  SetFaults(R"({"repos": {"org/gated": 403}})");
  const CliResult r403 = RunTern("pull org/gated/m.gguf");
  ExpectError(r403, "org/gated: forbidden (HTTP 403)");
  EXPECT_NE(r403.err.find("accept its terms"), std::string::npos) << r403.err;
  EXPECT_NE(r403.err.find("HF_TOKEN"), std::string::npos) << r403.err;
}

TEST_F(PullCliTest, TokenIsSentAsBearer) {
  const std::string bytes = TestBytes(5000, 12);
  Put("org/private/m.gguf", bytes);
  SetFaults(R"({"require_token": "hf_secret"})");
  ExpectError(RunTern("pull org/private/m.gguf"), "HTTP 401");
  ::setenv("HF_TOKEN", "hf_wrong", 1);
  ExpectError(RunTern("pull org/private/m.gguf"), "the token in HF_TOKEN was not accepted");
  ::setenv("HF_TOKEN", "hf_secret", 1);
  const CliResult r = RunTern("pull org/private/m.gguf");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(ReadFileBytes(CachePath("org/private/m.gguf")), bytes);
  const std::vector<nlohmann::json> gets = FileGets("org/private/m.gguf");
  ASSERT_FALSE(gets.empty());
  EXPECT_EQ(gets.back()["authorization"], "Bearer hf_secret");
}

TEST_F(PullCliTest, RedirectToACdnKeepsTheTokenHomeAndTheHeaderChecksum) {
  const std::string bytes = TestBytes(kFileBytes, 13);
  Put("org/cdn/m.gguf", bytes);
  // No lfs.sha256 in the listing: the checksum comes from the 302's
  // X-Linked-Etag (the CDN's own ETag is an md5).
  SetFaults(R"({"no_lfs": true, "require_token": "hf_secret",
                "files": {"org/cdn/m.gguf": {"redirect": true}}})");
  ::setenv("HF_TOKEN", "hf_secret", 1);
  const CliResult r = RunTern("pull org/cdn/m.gguf");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(ReadFileBytes(CachePath("org/cdn/m.gguf")), bytes);
  bool saw_cdn = false;
  for (const nlohmann::json& req : Requests()) {
    if (req["path"] != "/cdn/org/cdn/m.gguf") continue;
    saw_cdn = true;
    EXPECT_TRUE(req["authorization"].is_null()) << "token sent to another host: " << req;
  }
  EXPECT_TRUE(saw_cdn);
  EXPECT_EQ(r.err.find("not verified"), std::string::npos) << r.err;

  Put("org/cdn/bad.gguf", TestBytes(kFileBytes, 14));
  SetFaults(R"({"no_lfs": true, "require_token": "hf_secret",
                "files": {"org/cdn/bad.gguf": {"redirect": true, "corrupt": true}}})");
  const CliResult bad = RunTern("pull org/cdn/bad.gguf");
  ExpectError(bad, "checksum mismatch for org/cdn/bad.gguf: expected sha256 " +
                       hub::Sha256Hex(TestBytes(kFileBytes, 14)));
  EXPECT_FALSE(fs::exists(CachePath("org/cdn/bad.gguf")));
  EXPECT_FALSE(fs::exists(CachePath("org/cdn/bad.gguf.part")));
}

TEST_F(PullCliTest, BadSpecsAndArguments) {
  ExpectError(RunTern("pull justaname"), "expected ORG/REPO");
  ExpectError(RunTern("pull org/repo/../../x.gguf"), "'..' segment");
  ExpectError(RunTern("pull"), "expected one model SPEC");
  ExpectError(RunTern("pull a/b c/d"), "expected one model SPEC");
  EXPECT_TRUE(Requests().empty());
  const CliResult help = RunTern("pull --help");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("HF_ENDPOINT"), std::string::npos);
  EXPECT_NE(help.out.find("--offline"), std::string::npos);
}

TEST_F(PullCliTest, HfFlagRunsGenerateOnAFetchedModel) {
  if (!FileExists(DefaultModelPath())) GTEST_SKIP() << "test model missing: " << DefaultModelPath();
  Put("org/stories/tinyllamas/stories260K.gguf", ReadFileBytes(DefaultModelPath()));
  const std::string args = " -p 'Once upon a time' --temp 0 -n 30";
  const CliResult by_name = RunTern("generate -hf org/stories/tinyllamas/stories260K.gguf" + args);
  ASSERT_EQ(by_name.exit_code, 0) << by_name.err;
  const CliResult by_path = RunTern("generate -m " + ShellQuote(DefaultModelPath()) + args);
  ASSERT_EQ(by_path.exit_code, 0) << by_path.err;
  EXPECT_EQ(by_name.out, by_path.out);
  EXPECT_EQ(by_name.out.rfind(", there was a little girl named Lily", 0), 0u) << by_name.out;
  EXPECT_EQ(ReadFileBytes(CachePath("org/stories/tinyllamas/stories260K.gguf")),
            ReadFileBytes(DefaultModelPath()));
  // A second run, with the hub gone: from the cache.
  StopServer();
  const CliResult cached = RunTern("generate --hf-repo org/stories/tinyllamas/stories260K.gguf" + args);
  ASSERT_EQ(cached.exit_code, 0) << cached.err;
  EXPECT_EQ(cached.out, by_path.out);
}

TEST_F(PullCliTest, HfFlagErrors) {
  ExpectError(RunTern("generate -m x.gguf -hf org/repo/x.gguf -n 1"),
              "either by -m PATH or by -hf SPEC, not both");
  const CliResult missing = RunTern("tokenize -hf org/none/x.gguf -p hi");
  ExpectError(missing, "-hf org/none/x.gguf: repository org/none not found");
  EXPECT_EQ(missing.err.rfind("tern tokenize: ", 0), 0u) << missing.err;
}

}  // namespace
}  // namespace tern
