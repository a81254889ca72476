#include "server/http_parser.h"

#include <gtest/gtest.h>

namespace tern {
namespace {

const char kPost[] =
    "POST /v1/completions?x=1 HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\n"
    "Content-Length: 13\r\n\r\n{\"prompt\":\"a\"}";

TEST(HttpParserTest, ParsesOneRequestWithBody) {
  HttpParser p;
  p.Append(kPost);
  HttpRequest r;
  ASSERT_EQ(p.Next(&r), HttpParser::Result::kRequest);
  EXPECT_EQ(r.method, "POST");
  EXPECT_EQ(r.target, "/v1/completions?x=1");
  EXPECT_EQ(r.path, "/v1/completions");
  EXPECT_EQ(r.Header("content-type"), "application/json");
  EXPECT_EQ(r.body, "{\"prompt\":\"a\"");  // 13 bytes; the 14th stays buffered
  EXPECT_TRUE(r.keep_alive);
  EXPECT_EQ(p.buffered_bytes(), 1u);
}

TEST(HttpParserTest, AssemblesRequestFedOneByteAtATime) {
  const std::string raw = "POST /x HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello";
  HttpParser p;
  HttpRequest r;
  for (size_t i = 0; i + 1 < raw.size(); ++i) {
    p.Append(raw.substr(i, 1));
    ASSERT_EQ(p.Next(&r), HttpParser::Result::kNeedMore) << "at byte " << i;
  }
  p.Append(raw.substr(raw.size() - 1));
  ASSERT_EQ(p.Next(&r), HttpParser::Result::kRequest);
  EXPECT_EQ(r.body, "hello");
  EXPECT_EQ(p.buffered_bytes(), 0u);
}

TEST(HttpParserTest, SplitsPipelinedRequests) {
  HttpParser p;
  p.Append(
      "GET /health HTTP/1.1\r\n\r\nPOST /a HTTP/1.1\r\nContent-Length: 2\r\n\r\nokGET /b "
      "HTTP/1.1\r\n");
  HttpRequest r;
  ASSERT_EQ(p.Next(&r), HttpParser::Result::kRequest);
  EXPECT_EQ(r.path, "/health");
  EXPECT_EQ(r.body, "");
  ASSERT_EQ(p.Next(&r), HttpParser::Result::kRequest);
  EXPECT_EQ(r.path, "/a");
  EXPECT_EQ(r.body, "ok");
  EXPECT_EQ(p.Next(&r), HttpParser::Result::kNeedMore);
  p.Append("\r\n");
  ASSERT_EQ(p.Next(&r), HttpParser::Result::kRequest);
  EXPECT_EQ(r.path, "/b");
}

TEST(HttpParserTest, ConnectionCloseAndHttp10DisableKeepAlive) {
  HttpParser p;
  p.Append(
      "GET / HTTP/1.1\r\nConnection: close\r\n\r\nGET / HTTP/1.0\r\n\r\n"
      "GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n");
  HttpRequest r;
  ASSERT_EQ(p.Next(&r), HttpParser::Result::kRequest);
  EXPECT_FALSE(r.keep_alive);
  ASSERT_EQ(p.Next(&r), HttpParser::Result::kRequest);
  EXPECT_FALSE(r.keep_alive);
  ASSERT_EQ(p.Next(&r), HttpParser::Result::kRequest);
  EXPECT_TRUE(r.keep_alive);
}

struct BadCase {
  const char* raw;
  int status;
};

TEST(HttpParserTest, RejectsBadRequestsWithTheRightStatus) {
  const BadCase cases[] = {
      {"GARBAGE\r\n\r\n", 400},
      {"GET /a b HTTP/1.1\r\n\r\n", 400},
      {"GET noslash HTTP/1.1\r\n\r\n", 400},
      {"G(T / HTTP/1.1\r\n\r\n", 400},
      {"GET / FTP/1.1\r\n\r\n", 400},
      {"GET / HTTP/2.0\r\n\r\n", 505},
      {"GET / HTTP/1.1\r\nno colon here\r\n\r\n", 400},
      {"GET / HTTP/1.1\r\nBad Name: x\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nContent-Length: 12abc\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nContent-Length: 99999999999999999999999\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", 411},
      {"POST / HTTP/1.1\r\nContent-Length: 9000\r\n\r\n", 413},
  };
  for (const BadCase& c : cases) {
    HttpParser p(HttpLimits{.max_header_bytes = 1024, .max_body_bytes = 4096});
    p.Append(c.raw);
    HttpRequest r;
    EXPECT_EQ(p.Next(&r), HttpParser::Result::kError) << c.raw;
    EXPECT_EQ(p.error_status(), c.status) << c.raw;
    EXPECT_FALSE(p.error_message().empty());
    EXPECT_EQ(p.Next(&r), HttpParser::Result::kError) << "stays failed";
  }
}

TEST(HttpParserTest, RejectsHugeHeadersBeforeTheyEnd) {
  HttpParser p(HttpLimits{.max_header_bytes = 1024, .max_body_bytes = 4096});
  p.Append("GET / HTTP/1.1\r\nX-Big: " + std::string(2000, 'a'));
  HttpRequest r;
  EXPECT_EQ(p.Next(&r), HttpParser::Result::kError);
  EXPECT_EQ(p.error_status(), 431);
}

TEST(HttpParserTest, RejectsCompleteHeaderBlockOverTheLimit) {
  HttpParser p(HttpLimits{.max_header_bytes = 64, .max_body_bytes = 4096});
  p.Append("GET / HTTP/1.1\r\nX-Big: " + std::string(60, 'a') + "\r\n\r\n");
  HttpRequest r;
  EXPECT_EQ(p.Next(&r), HttpParser::Result::kError);
  EXPECT_EQ(p.error_status(), 431);
}

TEST(HttpParserTest, ReportsExpectContinueUntilBodyArrives) {
  HttpParser p;
  p.Append("POST / HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n");
  HttpRequest r;
  EXPECT_EQ(p.Next(&r), HttpParser::Result::kNeedMore);
  EXPECT_TRUE(p.WantsContinue());
  p.MarkContinueSent();
  EXPECT_FALSE(p.WantsContinue());
  p.Append("abc");
  ASSERT_EQ(p.Next(&r), HttpParser::Result::kRequest);
  EXPECT_EQ(r.body, "abc");
  EXPECT_FALSE(p.WantsContinue());
}

}  // namespace
}  // namespace tern
