// `tern bench serve` end to end: against a `tern serve` on stories260K over
// loopback, a small run writes a JSON result with the summary fields and the
// per-request arrays, and an SVG plot; bad flags and an unreachable server
// exit 1 with a message naming the problem.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <thread>

#include "base/paths.h"
#include "tests/cli_util.h"

namespace tern {
namespace {

using ::tern::testing::ReadFileBytes;
using ::tern::testing::RunTern;
using ::tern::testing::ShellQuote;
using ::tern::testing::TempDir;
using ::tern::testing::TernBinary;

// A `tern serve` child on a free loopback port, killed on destruction.
class ServeProcess {
 public:
  explicit ServeProcess(const std::string& model) {
    int fds[2];
    if (pipe(fds) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      dup2(fds[1], 2);
      close(fds[0]);
      execl(TernBinary().c_str(), "tern", "serve", "-m", model.c_str(), "--port", "0", "-t", "1",
            "--kv-cache-memory", "16MiB", (char*)nullptr);
      _exit(127);
    }
    close(fds[1]);
    std::string log;
    char buf[512];
    while (log.find("ready on") == std::string::npos) {
      ssize_t n = read(fds[0], buf, sizeof(buf));
      if (n <= 0) break;
      log.append(buf, (size_t)n);
    }
    // Keep draining the log so the server never blocks on a full pipe; the
    // read ends when the server exits.
    fd_ = fds[0];
    drain_ = std::thread([fd = fd_] {
      char b[512];
      while (read(fd, b, sizeof(b)) > 0) {
      }
    });
    std::smatch m;
    if (std::regex_search(log, m, std::regex("listening on http://127\\.0\\.0\\.1:(\\d+)"))) {
      port_ = std::stoi(m[1]);
    }
    log_ = log;
  }
  ~ServeProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      waitpid(pid_, nullptr, 0);
    }
    if (drain_.joinable()) drain_.join();
    if (fd_ >= 0) close(fd_);
  }
  int port() const { return port_; }
  const std::string& log() const { return log_; }

 private:
  pid_t pid_ = -1;
  std::thread drain_;
  int fd_ = -1;
  int port_ = 0;
  std::string log_;
};

class BenchServeCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (TernBinary().empty()) GTEST_SKIP() << "TERN_BINARY not set (run through ctest)";
    model_ = DefaultModelPath();
    if (!FileExists(model_)) GTEST_SKIP() << model_ << " not found";
  }
  std::string model_;
};

TEST_F(BenchServeCliTest, RandomPromptsAgainstTernServeWriteJsonAndSvg) {
  ServeProcess server(model_);
  ASSERT_GT(server.port(), 0) << server.log();
  TempDir dir;
  const std::string url = "http://127.0.0.1:" + std::to_string(server.port());
  const auto r = RunTern("bench serve -m " + ShellQuote(model_) + " --base-url " + url +
                         " --num-prompts 8 --random-input-len 24 --random-output-len 6"
                         " --max-concurrency 4 --ignore-eos --goodput ttft:600000 tpot:600000"
                         " --save-result " + ShellQuote(dir.File("r.json")));
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("Serving Benchmark Result"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Median TTFT (ms):"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("8/8 requests done"), std::string::npos) << r.err;

  const nlohmann::json j = nlohmann::json::parse(ReadFileBytes(dir.File("r.json")));
  EXPECT_EQ(j["completed"], 8);
  EXPECT_EQ(j["failed"], 0);
  EXPECT_EQ(j["good_requests"], 8);  // bounds of 10 minutes
  // Token-id prompts have exact lengths; --ignore-eos exact outputs.
  EXPECT_EQ(j["total_input_tokens"], 8 * 24);
  EXPECT_EQ(j["total_output_tokens"], 8 * 6);
  EXPECT_EQ(j["input_lens"].size(), 8u);
  EXPECT_EQ(j["output_lens"], nlohmann::json(std::vector<int>(8, 6)));
  EXPECT_EQ(j["max_concurrency"], 4);
  EXPECT_EQ(j["request_rate"], "inf");
  ASSERT_EQ(j["itls"].size(), 8u);
  for (const auto& itl : j["itls"]) EXPECT_GE(itl.size(), 1u);  // >= 2 text chunks
  for (const char* key : {"duration", "request_throughput", "output_throughput",
                          "request_goodput", "mean_ttft_ms", "median_ttft_ms", "p99_ttft_ms",
                          "median_tpot_ms", "p99_itl_ms", "median_e2el_ms"}) {
    ASSERT_TRUE(j.contains(key)) << key;
    EXPECT_GT(j[key].get<double>(), 0) << key;
  }
  EXPECT_LE(j["median_ttft_ms"].get<double>(), j["median_e2el_ms"].get<double>());
  for (const auto& e : j["errors"]) EXPECT_EQ(e, "");

  const std::string svg = ReadFileBytes(dir.File("r.svg"));
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("TTFT CDF"), std::string::npos);
  EXPECT_NE(svg.find("TTFT over time"), std::string::npos);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
}

TEST_F(BenchServeCliTest, SharedPrefixPromptsAtAPoissonRate) {
  ServeProcess server(model_);
  ASSERT_GT(server.port(), 0) << server.log();
  TempDir dir;
  const std::string url = "http://127.0.0.1:" + std::to_string(server.port());
  const auto r = RunTern("bench serve --tokenizer " + ShellQuote(model_) + " --base-url " + url +
                         " --dataset-name prefix-repetition --prefix-repetition-prefix-len 32"
                         " --prefix-repetition-suffix-len 4 --prefix-repetition-num-prefixes 2"
                         " --prefix-repetition-output-len 3 --num-prompts 6 --request-rate 50"
                         " --ignore-eos --seed 3 --save-result " + ShellQuote(dir.File("p.json")) +
                         " --plot " + ShellQuote(dir.File("plot.svg")));
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  const nlohmann::json j = nlohmann::json::parse(ReadFileBytes(dir.File("p.json")));
  EXPECT_EQ(j["completed"], 6);
  EXPECT_EQ(j["total_input_tokens"], 6 * 36);
  EXPECT_EQ(j["request_rate"], 50.0);
  EXPECT_EQ(j["dataset_name"], "prefix-repetition");
  // Poisson arrivals: the send times are spread, not all zero.
  const auto& starts = j["start_times"];
  EXPECT_GT(*std::max_element(starts.begin(), starts.end()), 0.0);
  EXPECT_EQ(ReadFileBytes(dir.File("plot.svg")).rfind("<svg", 0), 0u);
}

// --instance-metrics against the one server itself: it took every request,
// and the shared prefixes hit its prefix cache.
TEST_F(BenchServeCliTest, InstanceMetricsReportSpreadAndPrefixHitRate) {
  ServeProcess server(model_);
  ASSERT_GT(server.port(), 0) << server.log();
  TempDir dir;
  const std::string url = "http://127.0.0.1:" + std::to_string(server.port());
  const auto r = RunTern("bench serve --tokenizer " + ShellQuote(model_) + " --base-url " + url +
                         " --dataset-name prefix-repetition --prefix-repetition-prefix-len 64"
                         " --prefix-repetition-suffix-len 8 --prefix-repetition-num-prefixes 2"
                         " --prefix-repetition-output-len 2 --num-prompts 8 --max-concurrency 1"
                         " --ignore-eos --instance-metrics " + url + " --save-result " +
                         ShellQuote(dir.File("i.json")));
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("Instances (/metrics)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(url + "/metrics"), std::string::npos) << r.out;
  const nlohmann::json j = nlohmann::json::parse(ReadFileBytes(dir.File("i.json")));
  ASSERT_EQ(j["instances"].size(), 1u);
  const nlohmann::json& one = j["instances"][0];
  EXPECT_EQ(one["requests"].get<double>(), 8);  // the test request came before
  EXPECT_EQ(one["prompt_tokens"].get<double>(), 8 * 72);
  EXPECT_EQ(one["prefix_cache_queries"].get<double>(), 8 * 72);
  EXPECT_EQ(j["instance_max_over_mean"].get<double>(), 1.0);
  // Both 64-token prefixes were cached before the run (the test request
  // cached one; the other is computed once): at least 6 of 8 prompts hit
  // 4 full blocks of 16.
  EXPECT_GE(one["prefix_cache_hits"].get<double>(), 6 * 64);
  EXPECT_GT(j["prefix_cache_hit_rate"].get<double>(), 0.6);
}

TEST_F(BenchServeCliTest, BadFlagsAndAnUnreachableServerExitOne) {
  const std::string m = " -m " + ShellQuote(model_);
  const std::pair<std::string, const char*> cases[] = {
      {"bench serve", "-m MODEL"},
      {"bench serve" + m + " --request-rate fast", "--request-rate"},
      {"bench serve" + m + " --goodput ttft:abc", "--goodput"},
      {"bench serve" + m + " --goodput speed:10", "unknown metric"},
      {"bench serve" + m + " --dataset-name sharegpt", "--dataset-name"},
      {"bench serve" + m + " --dataset-name file", "--dataset-path"},
      {"bench serve" + m + " --random-range-ratio 1.5", "--random-range-ratio"},
      {"bench serve" + m + " --base-url localhost:1", "--base-url"},
      {"bench serve" + m + " --endpoint /v1/chat/completions --prompt-format ids", "text"},
      {"bench serve --dataset-name file --dataset-path /nonexistent.jsonl", "/nonexistent.jsonl"},
      {"bench serve" + m + " --instance-metrics 127.0.0.1:1", "--instance-metrics"},
      // Port 1 on loopback: nothing listens there.
      {"bench serve" + m + " --base-url http://127.0.0.1:1 --num-prompts 1", "127.0.0.1:1"},
  };
  for (const auto& [args, expect] : cases) {
    const auto r = RunTern(args);
    EXPECT_EQ(r.exit_code, 1) << args << "\n" << r.err;
    EXPECT_NE(r.err.find(expect), std::string::npos) << args << " -> " << r.err;
  }
}

}  // namespace
}  // namespace tern
