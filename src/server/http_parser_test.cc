#include "server/http_parser.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

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
  std::string raw;
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
      {"POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", 501},
      {"POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501},
      {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 400},
      {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcX\r\n", 400},
      {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffffff\r\n", 400},
      {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n" + std::string(2000, '1'), 400},
      {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1001\r\n", 413},
      {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n800\r\n" + std::string(2048, 'a') +
           "\r\n801\r\n", 413},
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

// Transfer-Encoding: chunked bodies are decoded (extensions and trailers
// dropped), byte by byte or whole, and pipelined requests after them parse.
TEST(HttpParserTest, DecodesChunkedBodies) {
  const std::string raw =
      "POST /c HTTP/1.1\r\nTransfer-Encoding: Chunked\r\n\r\n"
      "5;name=x\r\nhello\r\n1\r\n \r\nA\r\n0123456789\r\n0\r\nX-Trailer: t\r\n\r\n"
      "POST /d HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
      "GET /e HTTP/1.1\r\n\r\n";
  for (size_t step : {raw.size(), (size_t)1, (size_t)7}) {
    HttpParser p;
    std::vector<HttpRequest> got;
    for (size_t i = 0; i < raw.size(); i += step) {
      p.Append(raw.substr(i, step));
      HttpRequest r;
      HttpParser::Result res;
      while ((res = p.Next(&r)) == HttpParser::Result::kRequest) got.push_back(r);
      ASSERT_EQ(res, HttpParser::Result::kNeedMore) << p.error_message();
    }
    ASSERT_EQ(got.size(), 3u) << "step " << step;
    EXPECT_EQ(got[0].path, "/c");
    EXPECT_EQ(got[0].body, "hello 0123456789");
    EXPECT_EQ(got[1].path, "/d");
    EXPECT_EQ(got[1].body, "");
    EXPECT_EQ(got[2].path, "/e");
    EXPECT_EQ(p.buffered_bytes(), 0u);
    EXPECT_FALSE(p.head_complete());
  }
}

TEST(HttpParserTest, ChunkedBodyExactlyAtTheLimitIsAccepted) {
  HttpParser p(HttpLimits{.max_header_bytes = 1024, .max_body_bytes = 4096});
  p.Append("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n800\r\n" +
           std::string(2048, 'a') + "\r\n800\r\n" + std::string(2048, 'b') + "\r\n0\r\n\r\n");
  HttpRequest r;
  ASSERT_EQ(p.Next(&r), HttpParser::Result::kRequest) << p.error_message();
  EXPECT_EQ(r.body.size(), 4096u);
}

TEST(HttpParserTest, HeadCompleteTracksTheHeaderPhase) {
  HttpParser p;
  HttpRequest r;
  EXPECT_FALSE(p.head_complete());
  p.Append("POST / HTTP/1.1\r\nContent-Length: 3\r\n");
  EXPECT_EQ(p.Next(&r), HttpParser::Result::kNeedMore);
  EXPECT_FALSE(p.head_complete());
  p.Append("\r\nab");
  EXPECT_EQ(p.Next(&r), HttpParser::Result::kNeedMore);
  EXPECT_TRUE(p.head_complete());
  p.Append("c");
  EXPECT_EQ(p.Next(&r), HttpParser::Result::kRequest);
  EXPECT_FALSE(p.head_complete());
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
