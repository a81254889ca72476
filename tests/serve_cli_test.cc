// `tern serve` as a command: flag errors exit 1 with one clear line; a
// started server logs what it loaded, answers /health, takes its API key from
// $TERN_API_KEY when no flag gives one, logs one access line per request
// with -v, and exits 0 on SIGTERM.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "base/paths.h"

namespace tern {
namespace {

std::string Binary() {
  const char* b = std::getenv("TERN_BINARY");
  return b ? b : "";
}

// Runs `tern serve ARGS`, returns the exit code and stderr.
int RunServe(const std::string& args, std::string* err) {
  std::string cmd = Binary() + " serve " + args + " 2>&1 >/dev/null";
  FILE* p = popen(cmd.c_str(), "r");
  char buf[512];
  while (p && std::fgets(buf, sizeof(buf), p)) *err += buf;
  int status = p ? pclose(p) : -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

class ServeCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (Binary().empty()) GTEST_SKIP() << "TERN_BINARY not set (run through ctest)";
  }
};

TEST_F(ServeCliTest, HelpListsServerFlags) {
  std::string out;
  FILE* p = popen((Binary() + " serve --help").c_str(), "r");
  char buf[512];
  while (std::fgets(buf, sizeof(buf), p)) out += buf;
  EXPECT_EQ(pclose(p), 0);
  for (const char* flag : {"--host", "--port", "--api-key", "--api-key-file", "--served-model-name",
                           "--chat-template", "--max-body-bytes", "--max-num-seqs"}) {
    EXPECT_NE(out.find(flag), std::string::npos) << flag;
  }
}

TEST_F(ServeCliTest, BadFlagsExitOneWithOneLine) {
  const std::string model = DefaultModelPath();
  const std::pair<std::string, const char*> cases[] = {
      {"", "missing -m"},
      {"-m /nonexistent/model.gguf", "not found"},
      {"-m " + model + " --port 70000", "--port"},
      {"-m " + model + " --api-key a --api-key-file b", "not both"},
      {"-m " + model + " --api-key-file /nonexistent/key", "--api-key-file"},
      {"-m " + model + " --max-body-bytes lots", "--max-body-bytes"},
      {"-m " + model + " --scheduling-policy fastest", "--scheduling-policy"},
      {"-m " + model + " --target-itl-ms -5", "--target-itl-ms"},
      {"-m " + model + " --chat-template /nonexistent/template.jinja", "--chat-template"},
      {"--bogus-flag", "bogus"},
  };
  for (const auto& [args, expect] : cases) {
    std::string err;
    EXPECT_EQ(RunServe(args, &err), 1) << args;
    EXPECT_NE(err.find(expect), std::string::npos) << args << " -> " << err;
  }
}

// A `tern serve` child process on a free port, its stderr read through a
// pipe as it comes.
class ServeProcess {
 public:
  // args: after "serve"; env: "NAME=value" entries added to the environment
  // (TERN_API_KEY is removed first, so only a test that sets it has a key).
  ServeProcess(std::vector<std::string> args, std::vector<std::string> env = {}) {
    int fds[2];
    if (pipe(fds) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      dup2(fds[1], 2);
      close(fds[0]);
      unsetenv("TERN_API_KEY");
      for (std::string& e : env) putenv(e.data());
      std::vector<char*> argv = {(char*)"tern", (char*)"serve"};
      for (std::string& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(Binary().c_str(), argv.data());
      _exit(127);
    }
    close(fds[1]);
    fd_ = fds[0];
  }
  ~ServeProcess() {
    if (pid_ > 0) Stop();
    if (fd_ >= 0) close(fd_);
  }

  // Reads stderr until `pattern` matches what was read so far, or 60 s pass
  // or the process closes stderr. True on a match.
  bool ReadUntil(const std::string& pattern) {
    const std::regex re(pattern);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    char buf[4096];
    while (!std::regex_search(log_, re)) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 200) <= 0) continue;
      ssize_t n = read(fd_, buf, sizeof(buf));
      if (n <= 0) return false;
      log_.append(buf, (size_t)n);
    }
    return true;
  }
  const std::string& log() const { return log_; }
  // The port from "listening on http://127.0.0.1:PORT" (0 before that line).
  int port() const {
    std::smatch m;
    if (!std::regex_search(log_, m, std::regex("listening on http://127\\.0\\.0\\.1:(\\d+)")))
      return 0;
    return std::stoi(m[1]);
  }
  // SIGTERM, then the exit code (-1 when it did not exit normally).
  int Stop() {
    kill(pid_, SIGTERM);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

 private:
  pid_t pid_ = -1;
  int fd_ = -1;
  std::string log_;
};

// One HTTP/1.1 request on a fresh connection; the whole raw response.
std::string Http(int port, const std::string& method, const std::string& path,
                 const std::string& body = "", const std::string& headers = "") {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, (sockaddr*)&a, sizeof(a)) != 0) {
    close(fd);
    return "";
  }
  const std::string req = method + " " + path + " HTTP/1.1\r\nConnection: close\r\n" + headers +
                          "Content-Type: application/json\r\nContent-Length: " +
                          std::to_string(body.size()) + "\r\n\r\n" + body;
  send(fd, req.data(), req.size(), MSG_NOSIGNAL);
  std::string resp;
  char buf[4096];
  ssize_t n;
  while ((n = recv(fd, buf, sizeof(buf), 0)) > 0) resp.append(buf, (size_t)n);
  close(fd);
  return resp;
}

int StatusOf(const std::string& response) {
  return response.size() > 12 ? std::atoi(response.c_str() + 9) : 0;
}

class ServeModelTest : public ServeCliTest {
 protected:
  void SetUp() override {
    ServeCliTest::SetUp();
    if (IsSkipped()) return;
    model_ = DefaultModelPath();
    if (!FileExists(model_)) GTEST_SKIP() << model_ << " not found";
  }
  std::vector<std::string> Args(std::vector<std::string> extra = {}) const {
    std::vector<std::string> a = {"-m", model_, "--port", "0", "-t", "1", "--kv-cache-memory",
                                  "16MiB"};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  }
  std::string model_;
};

TEST_F(ServeModelTest, ServesHealthAndExitsZeroOnSigterm) {
  ServeProcess server(Args());
  ASSERT_TRUE(server.ReadUntil("ready on")) << server.log();
  ASSERT_GT(server.port(), 0) << server.log();
  EXPECT_NE(server.log().find("curl "), std::string::npos) << server.log();
  EXPECT_EQ(Http(server.port(), "GET", "/health").rfind("HTTP/1.1 200 OK", 0), 0u);
  EXPECT_EQ(server.Stop(), 0);
}

TEST_F(ServeModelTest, StartUpLogNamesModelComputeContextKvAndAddress) {
  ServeProcess server(Args());
  ASSERT_TRUE(server.ReadUntil("ready on")) << server.log();
  const std::string& log = server.log();
  const std::string file = std::filesystem::path(model_).filename().string();
  const std::string name = std::filesystem::path(model_).stem().string();
  for (const std::string& pattern : std::vector<std::string>{
           "listening on http://127\\.0\\.0\\.1:\\d+",
           "model \\S*" + file + " \\(served as '" + name + "', general\\.name '[^']*'\\)",
           "arch llama, weights [A-Z0-9_]+, [0-9.]+[KMB]? parameters \\([0-9.]+ [KMG]?i?B\\)",
           "loaded in [0-9]+\\.[0-9]+ s",
           "compute: 1 threads, kernels [a-z0-9_]+",
           "context: max_model_len \\d+ tokens \\(model context \\d+\\)",
           "KV cache: \\d+ blocks = \\d+ tokens \\([0-9.]+ [KMG]iB, F16\\)",
           "API key: none",
       }) {
    EXPECT_TRUE(std::regex_search(log, std::regex(pattern))) << pattern << "\n" << log;
  }
  EXPECT_EQ(server.Stop(), 0);
}

TEST_F(ServeModelTest, TernApiKeyFromTheEnvironmentGuardsTheApiAndFlagsWin) {
  ServeProcess server(Args(), {"TERN_API_KEY=env-key-1"});
  ASSERT_TRUE(server.ReadUntil("ready on")) << server.log();
  EXPECT_NE(server.log().find("API key: required, from $TERN_API_KEY"), std::string::npos)
      << server.log();
  EXPECT_NE(server.log().find("Authorization: Bearer $TERN_API_KEY"), std::string::npos)
      << "the curl hint names the variable that holds the key\n"
      << server.log();
  const int port = server.port();
  EXPECT_EQ(StatusOf(Http(port, "GET", "/v1/models")), 401);
  EXPECT_EQ(StatusOf(Http(port, "GET", "/v1/models", "", "Authorization: Bearer nope\r\n")), 401);
  EXPECT_EQ(StatusOf(Http(port, "GET", "/v1/models", "", "Authorization: Bearer env-key-1\r\n")),
            200);
  EXPECT_EQ(StatusOf(Http(port, "GET", "/health")), 200);
  EXPECT_EQ(server.Stop(), 0);

  ServeProcess flagged(Args({"--api-key", "flag-key"}), {"TERN_API_KEY=env-key-1"});
  ASSERT_TRUE(flagged.ReadUntil("ready on")) << flagged.log();
  EXPECT_NE(flagged.log().find("API key: required, from --api-key"), std::string::npos)
      << flagged.log();
  EXPECT_EQ(flagged.log().find("$TERN_API_KEY\""), std::string::npos)
      << "the hint does not point at a variable that holds another key\n"
      << flagged.log();
  const int port2 = flagged.port();
  EXPECT_EQ(StatusOf(Http(port2, "GET", "/v1/models", "", "Authorization: Bearer env-key-1\r\n")),
            401);
  EXPECT_EQ(StatusOf(Http(port2, "GET", "/v1/models", "", "Authorization: Bearer flag-key\r\n")),
            200);
  EXPECT_EQ(flagged.Stop(), 0);
}

TEST_F(ServeModelTest, VerboseLogsOneAccessLinePerRequest) {
  ServeProcess server(Args({"-v"}));
  ASSERT_TRUE(server.ReadUntil("ready on")) << server.log();
  const int port = server.port();
  const std::string resp =
      Http(port, "POST", "/v1/completions", R"({"prompt": "Once upon", "max_tokens": 3})");
  ASSERT_EQ(StatusOf(resp), 200) << resp;
  std::smatch id;
  ASSERT_TRUE(std::regex_search(resp, id, std::regex("\"id\":\"(cmpl-[0-9a-f]+)\""))) << resp;
  EXPECT_EQ(StatusOf(Http(port, "GET", "/v1/models/nope")), 404);
  // Each line is written once its answer is sent, from its connection's thread.
  ASSERT_TRUE(server.ReadUntil("path=/v1/models/nope .*\n")) << server.log();
  ASSERT_TRUE(server.ReadUntil("path=/v1/completions .*\n")) << server.log();

  std::vector<std::string> lines;
  std::string c, nope;
  std::istringstream in(server.log());
  for (std::string line; std::getline(in, line);) {
    if (line.find(" access ") == std::string::npos) continue;
    lines.push_back(line);
    (line.find(" path=/v1/completions ") != std::string::npos ? c : nope) = line;
  }
  ASSERT_EQ(lines.size(), 2u) << server.log();
  for (const std::string& field :
       {"id=" + id[1].str(), std::string("method=POST"), std::string("path=/v1/completions"),
        std::string("status=200"), std::string("completion_tokens=3"),
        std::string("cached_tokens=0"), std::string("finish=length"),
        std::string("client=127.0.0.1:")}) {
    EXPECT_NE(c.find(" " + field), std::string::npos) << field << " in " << c;
  }
  for (const char* pattern :
       {"time=\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d\\.\\d{3}Z", "prompt_tokens=[1-9]\\d*",
        "ttft_ms=[0-9]+\\.[0-9]", "duration_ms=[0-9]+\\.[0-9]"}) {
    EXPECT_TRUE(std::regex_search(c, std::regex(pattern))) << pattern << " in " << c;
  }
  EXPECT_NE(nope.find(" status=404 "), std::string::npos) << nope;
  EXPECT_NE(nope.find(" id=- "), std::string::npos) << nope;
  EXPECT_NE(nope.find(" ttft_ms=- "), std::string::npos) << nope;
  EXPECT_EQ(server.Stop(), 0);
}

TEST_F(ServeModelTest, WithoutVerboseThereIsNoAccessLog) {
  ServeProcess server(Args());
  ASSERT_TRUE(server.ReadUntil("ready on")) << server.log();
  EXPECT_EQ(StatusOf(Http(server.port(), "GET", "/v1/models")), 200);
  EXPECT_EQ(server.Stop(), 0);
  server.ReadUntil("stopped");
  EXPECT_EQ(server.log().find(" access "), std::string::npos) << server.log();
}

}  // namespace
}  // namespace tern
