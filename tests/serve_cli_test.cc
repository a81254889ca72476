// `tern serve` as a command: flag errors exit 1 with one clear line, and a
// started server answers /health and exits 0 on SIGTERM.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <regex>
#include <string>
#include <thread>

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

TEST_F(ServeCliTest, ServesHealthAndExitsZeroOnSigterm) {
  const std::string model = DefaultModelPath();
  if (!FileExists(model)) GTEST_SKIP() << model << " not found";
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(pipe_fds[1], 2);
    close(pipe_fds[0]);
    execl(Binary().c_str(), "tern", "serve", "-m", model.c_str(), "--port", "0", "-t", "1",
          "--kv-cache-memory", "16MiB", (char*)nullptr);
    _exit(127);
  }
  close(pipe_fds[1]);
  // The start-up log names the port; read until "ready".
  std::string log;
  char buf[512];
  int port = 0;
  while (log.find("ready on") == std::string::npos) {
    ssize_t n = read(pipe_fds[0], buf, sizeof(buf));
    if (n <= 0) break;
    log.append(buf, (size_t)n);
  }
  std::smatch m;
  if (std::regex_search(log, m, std::regex("listening on http://127\\.0\\.0\\.1:(\\d+)"))) {
    port = std::stoi(m[1]);
  }
  ASSERT_GT(port, 0) << log;
  EXPECT_NE(log.find("KV cache"), std::string::npos) << log;
  EXPECT_NE(log.find("curl "), std::string::npos) << log;

  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(fd, (sockaddr*)&a, sizeof(a)), 0);
  const std::string req = "GET /health HTTP/1.1\r\nConnection: close\r\n\r\n";
  ASSERT_EQ(send(fd, req.data(), req.size(), 0), (ssize_t)req.size());
  std::string resp;
  ssize_t n;
  while ((n = recv(fd, buf, sizeof(buf), 0)) > 0) resp.append(buf, (size_t)n);
  close(fd);
  EXPECT_EQ(resp.rfind("HTTP/1.1 200 OK", 0), 0u) << resp;

  kill(pid, SIGTERM);
  int status = 0;
  waitpid(pid, &status, 0);
  close(pipe_fds[0]);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

}  // namespace
}  // namespace tern
