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

// The line is one line whose fields include every one of `want`.
void ExpectFields(const std::string& line, const std::map<std::string, std::string>& want) {
  EXPECT_EQ(line.find('\n'), std::string::npos);
  const auto f = Fields(line);
  for (const auto& [key, value] : want) {
    ASSERT_TRUE(f.count(key)) << key << " missing in " << line;
    EXPECT_EQ(f.at(key), value) << key;
  }
}

TEST(AccessLogTest, OneLineOfKeyValuePairs) {
  const AccessLogEntry e = {
      .time = std::chrono::system_clock::time_point(std::chrono::milliseconds(1764694201234)),
      .request_id = "cmpl-abc", .client = "127.0.0.1:5000", .method = "POST",
      .path = "/v1/completions", .status = 200, .prompt_tokens = 5, .completion_tokens = 16,
      .cached_tokens = 4, .ttft_ms = 12.34, .duration_ms = 80.46, .finish_reason = "length"};
  ExpectFields(FormatAccessLog(e), {
                                       {"time", "2025-12-02T16:50:01.234Z"},
                                       {"id", "cmpl-abc"},
                                       {"client", "127.0.0.1:5000"},
                                       {"method", "POST"},
                                       {"path", "/v1/completions"},
                                       {"status", "200"},
                                       {"prompt_tokens", "5"},
                                       {"completion_tokens", "16"},
                                       {"cached_tokens", "4"},
                                       {"ttft_ms", "12.3"},
                                       {"duration_ms", "80.5"},
                                       {"finish", "length"},
                                   });
}

TEST(AccessLogTest, MissingValuesAreDashesAndOddBytesCannotSplitTheLine) {
  AccessLogEntry e;
  e.method = "GET";
  e.path = "/v1/models/a b\nc";
  e.status = 404;
  ExpectFields(FormatAccessLog(e), {
                                       {"id", "-"},
                                       {"client", "-"},
                                       {"path", "/v1/models/a?b?c"},
                                       {"ttft_ms", "-"},
                                       {"finish", "-"},
                                       {"status", "404"},
                                   });
}

}  // namespace
}  // namespace tern
