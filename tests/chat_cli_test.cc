// End-to-end tests of `tern chat`: scripted through stdin, its replies are
// those `tern serve` gives for the same conversation on /v1/chat/completions,
// and the prefix cache serves the earlier turns.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "base/paths.h"
#include "tests/cli_util.h"

namespace tern {
namespace {

using testing::RunTern;
using testing::ShellQuote;

constexpr int kMaxTokens = 24;

std::string ChatArgs() {
  return "chat -m " + ShellQuote(DefaultModelPath()) + " --chat-template chatml --temp 0 -n " +
         std::to_string(kMaxTokens) + " -t 1";
}

struct TurnLine {
  int prompt_tokens = 0;
  int cached_tokens = 0;
};

// The "[turn N] prompt P tokens (C cached)" lines of stderr, in order.
std::vector<TurnLine> TurnLines(const std::string& err) {
  std::vector<TurnLine> turns;
  const std::regex re("\\[turn \\d+\\] prompt (\\d+) tokens \\((\\d+) cached\\)");
  for (auto it = std::sregex_iterator(err.begin(), err.end(), re); it != std::sregex_iterator();
       ++it) {
    turns.push_back({std::stoi((*it)[1]), std::stoi((*it)[2])});
  }
  return turns;
}

// `tern serve` on a free loopback port, stopped with SIGTERM on destruction.
class ServeProcess {
 public:
  explicit ServeProcess(const std::vector<std::string>& args) {
    int fds[2];
    if (pipe(fds) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      dup2(fds[1], 2);
      close(fds[0]);
      std::vector<char*> argv;
      static const std::string kName = "tern";
      argv.push_back(const_cast<char*>(kName.c_str()));
      for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      const std::string bin = testing::TernBinary();
      execv(bin.c_str(), argv.data());
      _exit(127);
    }
    close(fds[1]);
    char buf[512];
    while (log_.find("ready on") == std::string::npos) {
      ssize_t n = read(fds[0], buf, sizeof(buf));
      if (n <= 0) break;
      log_.append(buf, (size_t)n);
    }
    stderr_fd_ = fds[0];
    std::smatch m;
    if (log_.find("ready on") != std::string::npos &&
        std::regex_search(log_, m, std::regex("listening on http://127\\.0\\.0\\.1:(\\d+)"))) {
      port_ = std::stoi(m[1]);
    }
  }
  ~ServeProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      int status = 0;
      waitpid(pid_, &status, 0);
    }
    if (stderr_fd_ >= 0) close(stderr_fd_);
  }
  int port() const { return port_; }
  const std::string& log() const { return log_; }

  // POSTs body to path; returns the response body ("" on a transport error).
  std::string Post(const std::string& path, const std::string& body) const {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port_);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (sockaddr*)&a, sizeof(a)) != 0) {
      close(fd);
      return "";
    }
    const std::string req = "POST " + path +
                            " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                            "Connection: close\r\nContent-Length: " +
                            std::to_string(body.size()) + "\r\n\r\n" + body;
    send(fd, req.data(), req.size(), 0);
    std::string resp;
    char buf[4096];
    ssize_t n;
    while ((n = recv(fd, buf, sizeof(buf), 0)) > 0) resp.append(buf, (size_t)n);
    close(fd);
    const size_t at = resp.find("\r\n\r\n");
    return at == std::string::npos ? "" : resp.substr(at + 4);
  }

 private:
  pid_t pid_ = -1;
  int stderr_fd_ = -1;
  int port_ = 0;
  std::string log_;
};

TEST(ChatCliTest, ThreeTurnsUseTheCacheAndEqualTheServersReplies) {
  SKIP_WITHOUT_MODEL();
  testing::TempDir dir;
  const std::string saved = dir.File("conversation.json");
  const std::string script =
      "Tell me a story about a cat.\nWhat did the cat do next?\nHow did it end?\n/save " + saved +
      "\n";
  const testing::CliResult r = RunTern(ChatArgs() + " --system 'You tell stories.'", script);
  ASSERT_EQ(r.exit_code, 0) << r.err;

  // Three turns reported; turns 2 and 3 find most of their prompt cached:
  // at least every full 16-token block of the previous turn's prompt.
  const std::vector<TurnLine> turns = TurnLines(r.err);
  ASSERT_EQ(turns.size(), 3u) << r.err;
  for (size_t i = 1; i < turns.size(); ++i) {
    SCOPED_TRACE("turn " + std::to_string(i + 1));
    EXPECT_GT(turns[i].prompt_tokens, turns[i - 1].prompt_tokens);
    EXPECT_GE(turns[i].cached_tokens, turns[i - 1].prompt_tokens / 16 * 16 - 16) << r.err;
    EXPECT_GT(2 * turns[i].cached_tokens, turns[i].prompt_tokens) << r.err;
    EXPECT_LT(turns[i].cached_tokens, turns[i].prompt_tokens);
  }

  // /save wrote system, user, assistant x 3.
  const nlohmann::json conv = nlohmann::json::parse(testing::ReadFileBytes(saved), nullptr, false);
  ASSERT_TRUE(conv.contains("messages")) << testing::ReadFileBytes(saved);
  const nlohmann::json& messages = conv["messages"];
  ASSERT_EQ(messages.size(), 7u) << messages.dump();
  EXPECT_EQ(messages[0]["role"], "system");
  EXPECT_EQ(messages[1]["content"], "Tell me a story about a cat.");
  std::string expected_out;
  for (int i = 2; i < 7; i += 2) {
    EXPECT_EQ(messages[i]["role"], "assistant");
    expected_out += messages[i]["content"].get<std::string>() + "\n";
  }
  // Piped stdout: only the replies, one after another.
  EXPECT_EQ(r.out, expected_out);

  // The same conversation through tern serve: each turn sent with the
  // earlier replies gives the same reply.
  ServeProcess serve({"serve", "-m", DefaultModelPath(), "--port", "0", "-t", "1",
                      "--chat-template", "chatml", "--kv-cache-memory", "16MiB"});
  ASSERT_GT(serve.port(), 0) << serve.log();
  for (int turn = 0; turn < 3; ++turn) {
    SCOPED_TRACE("turn " + std::to_string(turn + 1));
    nlohmann::json request = {{"messages", nlohmann::json::array()},
                              {"temperature", 0},
                              {"max_tokens", kMaxTokens}};
    for (int i = 0; i < 2 + 2 * turn; ++i) request["messages"].push_back(messages[i]);
    const std::string body = serve.Post("/v1/chat/completions", request.dump());
    const nlohmann::json reply = nlohmann::json::parse(body, nullptr, false);
    ASSERT_TRUE(reply.contains("choices")) << body;
    EXPECT_EQ(reply["choices"][0]["message"]["content"], messages[2 + 2 * turn]["content"]);
    EXPECT_EQ(reply["usage"]["prompt_tokens"], turns[turn].prompt_tokens);
  }
}

TEST(ChatCliTest, ResetStartsOverAndFindsTheFirstTurnCached) {
  SKIP_WITHOUT_MODEL();
  testing::TempDir dir;
  const std::string saved = dir.File("after_reset.json");
  const testing::CliResult r = RunTern(
      ChatArgs(), "Hello there.\nAnd then?\n/reset\nHello there.\n/save " + saved +
                      "\n/help\n/exit\nignored\n");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<TurnLine> turns = TurnLines(r.err);
  ASSERT_EQ(turns.size(), 3u) << r.err;  // nothing after /exit
  // After /reset the first turn's prompt again, found in the cache but for
  // its last partial block (and the last token, recomputed for its logits).
  EXPECT_EQ(turns[2].prompt_tokens, turns[0].prompt_tokens);
  EXPECT_GE(turns[2].cached_tokens, turns[0].prompt_tokens / 16 * 16 - 16) << r.err;
  EXPECT_GT(turns[2].cached_tokens, 0) << r.err;
  EXPECT_NE(r.err.find("/save FILE"), std::string::npos) << r.err;  // /help
  // /save after /reset holds only the new conversation...
  const nlohmann::json conv = nlohmann::json::parse(testing::ReadFileBytes(saved), nullptr, false);
  ASSERT_TRUE(conv.contains("messages")) << testing::ReadFileBytes(saved);
  ASSERT_EQ(conv["messages"].size(), 2u) << conv.dump();
  EXPECT_EQ(conv["messages"][0]["content"], "Hello there.");
  // ...whose greedy reply is the one the first conversation began with.
  const std::string reply = conv["messages"][1]["content"].get<std::string>() + "\n";
  EXPECT_EQ(r.out.rfind(reply, 0), 0u) << r.out;
  ASSERT_GT(r.out.size(), 2 * reply.size()) << r.out;
  EXPECT_EQ(r.out.substr(r.out.size() - reply.size()), reply) << r.out;
}

TEST(ChatCliTest, SeedReplaysASampledConversation) {
  SKIP_WITHOUT_MODEL();
  const std::string args = "chat -m " + ShellQuote(DefaultModelPath()) +
                           " --chat-template chatml --temp 1 -n 16 -t 1 --seed 5";
  const std::string script = "Hello.\nHello.\n";
  const testing::CliResult a = RunTern(args, script);
  const testing::CliResult b = RunTern(args, script);
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_NE(a.err.find("seed 5"), std::string::npos) << a.err;
  EXPECT_FALSE(a.out.empty());
  EXPECT_EQ(a.out, b.out);
  const testing::CliResult c = RunTern(args + "6", script);  // --seed 56
  ASSERT_EQ(c.exit_code, 0) << c.err;
  EXPECT_NE(a.out, c.out);
}

TEST(ChatCliTest, ModelWithoutTemplateNeedsChatTemplate) {
  SKIP_WITHOUT_MODEL();
  const testing::CliResult r = RunTern("chat -m " + ShellQuote(DefaultModelPath()), "hi\n");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--chat-template"), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
}

TEST(ChatCliTest, BadFlagsNameTheFlag) {
  SKIP_WITHOUT_MODEL();
  const std::string model = " -m " + ShellQuote(DefaultModelPath()) + " --chat-template chatml";
  const std::pair<std::string, const char*> cases[] = {
      {"chat", "missing -m"},
      {"chat" + model + " -c 100000", "-c 100000 exceeds the model's context length 2048"},
      {"chat" + model + " -n 0", "-n must be"},
      {"chat" + model + " --top-p 0", "--top-p must be"},
      {"chat -m " + ShellQuote(DefaultModelPath()) + " --chat-template /nonexistent.jinja",
       "--chat-template"},
      {"chat -m /nonexistent/model.gguf", "/nonexistent/model.gguf"},
  };
  for (const auto& [args, needle] : cases) {
    SCOPED_TRACE(args);
    const testing::CliResult r = RunTern(args, "hi\n");
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
  }
}

TEST(ChatCliTest, ConversationPastTheContextIsRefusedNotTruncated) {
  SKIP_WITHOUT_MODEL();
  // -c 32: the chatml wrapping alone nearly fills it; a long line cannot fit.
  const std::string long_line(200, 'a');
  const testing::CliResult r = RunTern(ChatArgs() + " -c 32", long_line + "\n");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("leaves no room for a reply in the context of 32 tokens"),
            std::string::npos)
      << r.err;
  EXPECT_TRUE(TurnLines(r.err).empty()) << r.err;
}

}  // namespace
}  // namespace tern
