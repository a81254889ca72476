#include "server/access_log.h"

#include <gtest/gtest.h>

#include <map>
#include <sstream>

namespace tern {
namespace {

std::map<std::string, std::string> Fields(const std::string& line) {
  std::map<std::string, std::string> out;
  std::istringstream in(line);
  std::string word;
  in >> word;
  EXPECT_EQ(word, "access");
  while (in >> word) {
    const size_t eq = word.find('=');
    EXPECT_NE(eq, std::string::npos) << word;
    out[word.substr(0, eq)] = word.substr(eq + 1);
  }
  return out;
}

TEST(AccessLogTest, OneLineOfKeyValuePairs) {
  AccessLogEntry e;
  e.time = std::chrono::system_clock::time_point(std::chrono::milliseconds(1764694201234));
  e.request_id = "cmpl-abc";
  e.client = "127.0.0.1:5000";
  e.method = "POST";
  e.path = "/v1/completions";
  e.status = 200;
  e.prompt_tokens = 5;
  e.completion_tokens = 16;
  e.cached_tokens = 4;
  e.ttft_ms = 12.34;
  e.duration_ms = 80.46;
  e.finish_reason = "length";
  const std::string line = FormatAccessLog(e);
  EXPECT_EQ(line.find('\n'), std::string::npos);
  const auto f = Fields(line);
  EXPECT_EQ(f.at("time"), "2025-12-02T16:50:01.234Z");
  EXPECT_EQ(f.at("id"), "cmpl-abc");
  EXPECT_EQ(f.at("client"), "127.0.0.1:5000");
  EXPECT_EQ(f.at("method"), "POST");
  EXPECT_EQ(f.at("path"), "/v1/completions");
  EXPECT_EQ(f.at("status"), "200");
  EXPECT_EQ(f.at("prompt_tokens"), "5");
  EXPECT_EQ(f.at("completion_tokens"), "16");
  EXPECT_EQ(f.at("cached_tokens"), "4");
  EXPECT_EQ(f.at("ttft_ms"), "12.3");
  EXPECT_EQ(f.at("duration_ms"), "80.5");
  EXPECT_EQ(f.at("finish"), "length");
}

TEST(AccessLogTest, MissingValuesAreDashesAndOddBytesCannotSplitTheLine) {
  AccessLogEntry e;
  e.method = "GET";
  e.path = "/v1/models/a b\nc";
  e.status = 404;
  const std::string line = FormatAccessLog(e);
  EXPECT_EQ(line.find('\n'), std::string::npos);
  const auto f = Fields(line);
  EXPECT_EQ(f.at("id"), "-");
  EXPECT_EQ(f.at("client"), "-");
  EXPECT_EQ(f.at("path"), "/v1/models/a?b?c");
  EXPECT_EQ(f.at("ttft_ms"), "-");
  EXPECT_EQ(f.at("finish"), "-");
  EXPECT_EQ(f.at("status"), "404");
}

}  // namespace
}  // namespace tern
