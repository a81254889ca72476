#include "server/http_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace tern {
namespace {

int Connect(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::connect(fd, (sockaddr*)&a, sizeof(a)), 0);
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  return fd;
}

void Send(int fd, const std::string& s) {
  ASSERT_EQ(::send(fd, s.data(), s.size(), MSG_NOSIGNAL), (ssize_t)s.size());
}

// Reads until `until` appears (or the peer closes / times out).
std::string ReadUntil(int fd, const std::string& until) {
  std::string out;
  char buf[4096];
  while (out.find(until) == std::string::npos) {
    ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    out.append(buf, (size_t)n);
  }
  return out;
}

std::string ReadAll(int fd) { return ReadUntil(fd, std::string(1, '\0')); }

class HttpServerTest : public ::testing::Test {
 protected:
  void StartServer(HttpServerOptions o = {}) {
    o.host = "127.0.0.1";
    o.port = 0;
    server_ = std::make_unique<HttpServer>(
        o, [this](const HttpRequest& r, HttpExchange& ex) { Handle(r, ex); });
    ASSERT_TRUE(server_->Listen().ok());
    server_->Start();
  }
  void Handle(const HttpRequest& r, HttpExchange& ex) {
    if (r.path == "/stream") {
      ex.BeginEventStream();
      for (int i = 0; i < 3; ++i) ex.SendEvent("{\"i\":" + std::to_string(i) + "}");
      ex.SendEvent("[DONE]");
      ex.EndEventStream();
    } else if (r.path == "/forever") {
      // Streams until the client goes away.
      ex.BeginEventStream();
      for (int i = 0; i < 500 && !ex.ClientGone(); ++i) {
        if (!ex.SendEvent("{}")) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      gone_seen_ = ex.ClientGone();
      ex.EndEventStream();
    } else if (r.path == "/peer") {
      ex.Respond(200, "text/plain", r.remote_addr);
    } else if (r.path == "/slow") {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      ex.Respond(200, "text/plain", "slow");
    } else {
      ex.Respond(200, "text/plain", r.method + " " + r.path + " " + r.body);
    }
  }
  void TearDown() override {
    if (server_) server_->Stop(std::chrono::milliseconds(2000));
  }

  std::unique_ptr<HttpServer> server_;
  std::atomic<bool> gone_seen_{false};
};

TEST_F(HttpServerTest, ServesKeepAliveAndPipelinedRequests) {
  StartServer();
  int fd = Connect(server_->port());
  Send(fd, "GET /a HTTP/1.1\r\nHost: x\r\n\r\n");
  std::string r1 = ReadUntil(fd, "GET /a ");
  EXPECT_NE(r1.find("HTTP/1.1 200 OK\r\n"), std::string::npos);
  EXPECT_NE(r1.find("Content-Length: 7\r\n"), std::string::npos);
  EXPECT_NE(r1.find("Connection: keep-alive"), std::string::npos);
  Send(fd,
       "POST /b HTTP/1.1\r\nContent-Length: 2\r\n\r\nhiGET /c HTTP/1.1\r\nConnection: "
       "close\r\n\r\n");
  std::string rest = ReadAll(fd);
  EXPECT_NE(rest.find("POST /b hi"), std::string::npos);
  EXPECT_NE(rest.find("GET /c "), std::string::npos);
  EXPECT_NE(rest.find("Connection: close"), std::string::npos);
  ::close(fd);
}

TEST_F(HttpServerTest, RequestsCarryTheClientAddress) {
  StartServer();
  int fd = Connect(server_->port());
  sockaddr_in local{};
  socklen_t len = sizeof(local);
  ASSERT_EQ(::getsockname(fd, (sockaddr*)&local, &len), 0);
  Send(fd, "GET /peer HTTP/1.1\r\nConnection: close\r\n\r\n");
  std::string r = ReadAll(fd);
  EXPECT_NE(r.find("\r\n\r\n127.0.0.1:" + std::to_string(ntohs(local.sin_port))),
            std::string::npos)
      << r;
  ::close(fd);
}

TEST_F(HttpServerTest, AnswersParseErrorsWithStatusAndCloses) {
  HttpServerOptions o;
  o.limits.max_body_bytes = 100;
  o.limits.max_header_bytes = 512;
  StartServer(o);
  struct Case {
    std::string raw;
    const char* status_line;
  };
  const Case cases[] = {
      {"POST / HTTP/1.1\r\nContent-Length: 101\r\n\r\n", "HTTP/1.1 413 "},
      {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", "HTTP/1.1 411 "},
      {"BROKEN\r\n\r\n", "HTTP/1.1 400 "},
      {"GET / HTTP/1.1\r\nX: " + std::string(1000, 'a') + "\r\n\r\n", "HTTP/1.1 431 "},
  };
  for (const Case& c : cases) {
    int fd = Connect(server_->port());
    Send(fd, c.raw);
    std::string resp = ReadAll(fd);
    EXPECT_EQ(resp.rfind(c.status_line, 0), 0u) << resp;
    EXPECT_NE(resp.find("{\"error\":{\"message\":"), std::string::npos) << resp;
    ::close(fd);
  }
}

TEST_F(HttpServerTest, StreamsChunkedServerSentEvents) {
  StartServer();
  int fd = Connect(server_->port());
  Send(fd, "GET /stream HTTP/1.1\r\n\r\n");
  std::string resp = ReadUntil(fd, "0\r\n\r\n");
  EXPECT_NE(resp.find("Content-Type: text/event-stream\r\n"), std::string::npos);
  EXPECT_NE(resp.find("Transfer-Encoding: chunked\r\n"), std::string::npos);
  EXPECT_NE(resp.find("f\r\ndata: {\"i\":0}\n\n\r\n"), std::string::npos) << resp;
  EXPECT_NE(resp.find("e\r\ndata: [DONE]\n\n\r\n0\r\n\r\n"), std::string::npos) << resp;
  // The connection stays usable after the stream.
  Send(fd, "GET /after HTTP/1.1\r\n\r\n");
  EXPECT_NE(ReadUntil(fd, "GET /after").find("GET /after"), std::string::npos);
  ::close(fd);
}

TEST_F(HttpServerTest, DetectsClientDisconnectMidStream) {
  StartServer();
  int fd = Connect(server_->port());
  Send(fd, "GET /forever HTTP/1.1\r\n\r\n");
  ReadUntil(fd, "data: {}");
  ::close(fd);
  for (int i = 0; i < 200 && server_->num_connections() > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(server_->num_connections(), 0);
  EXPECT_TRUE(gone_seen_.load());
}

TEST_F(HttpServerTest, RejectsConnectionsBeyondTheLimitWith503) {
  HttpServerOptions o;
  o.max_connections = 1;
  StartServer(o);
  int first = Connect(server_->port());
  Send(first, "GET /slow HTTP/1.1\r\n\r\n");
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  int second = Connect(server_->port());
  std::string resp = ReadAll(second);
  EXPECT_EQ(resp.rfind("HTTP/1.1 503 ", 0), 0u) << resp;
  EXPECT_NE(ReadUntil(first, "slow").find("slow"), std::string::npos);
  ::close(first);
  ::close(second);
}

TEST_F(HttpServerTest, StalledRequestGets408) {
  HttpServerOptions o;
  o.read_timeout_ms = 300;
  StartServer(o);
  int fd = Connect(server_->port());
  Send(fd, "POST / HTTP/1.1\r\nContent-Length: 10\r\n\r\nabc");
  std::string resp = ReadAll(fd);
  EXPECT_EQ(resp.rfind("HTTP/1.1 408 ", 0), 0u) << resp;
  ::close(fd);
}

TEST_F(HttpServerTest, StopClosesIdleKeepAliveConnections) {
  StartServer();
  int fd = Connect(server_->port());
  Send(fd, "GET /a HTTP/1.1\r\n\r\n");
  ReadUntil(fd, "GET /a");
  auto t0 = std::chrono::steady_clock::now();
  server_->Stop(std::chrono::milliseconds(3000));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(2000));
  EXPECT_EQ(server_->num_connections(), 0);
  ::close(fd);
}

}  // namespace
}  // namespace tern
