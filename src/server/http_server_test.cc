#include "server/http_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

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
    } else if (r.path == "/flood") {
      // 4 KiB events as fast as the exchange takes them, until it refuses.
      ex.BeginEventStream();
      const std::string event(4096, 'x');
      int64_t sent = 0;
      bool refused = false;
      for (int i = 0; i < 200000; ++i) {
        if (!ex.SendEvent(event)) {
          refused = true;
          break;
        }
        sent += (int64_t)event.size();
      }
      ex.EndEventStream();
      std::lock_guard<std::mutex> lock(mu_);
      flood_bytes_ = sent;
      flood_refused_ = refused;
      flood_done_ = true;
      cv_.notify_all();
    } else if (r.path == "/peer") {
      ex.Respond(200, "text/plain", r.remote_addr);
    } else if (r.path == "/slow") {
      // Holds its connection busy until the test releases it.
      std::unique_lock<std::mutex> lock(mu_);
      slow_entered_ = true;
      cv_.notify_all();
      cv_.wait(lock, [&] { return slow_released_; });
      lock.unlock();
      ex.Respond(200, "text/plain", "slow");
    } else {
      ex.Respond(200, "text/plain", r.method + " " + r.path + " " + r.body);
    }
  }
  void TearDown() override {
    ReleaseSlow();  // never leave a handler waiting
    if (server_) server_->Stop(std::chrono::milliseconds(2000));
  }

  // Sends GET /slow on a new connection and waits until its handler runs
  // (and holds the connection's thread until ReleaseSlow); returns the fd,
  // or -1 when the handler did not start within 30 s.
  int StartSlowRequest() {
    const int fd = Connect(server_->port());
    Send(fd, "GET /slow HTTP/1.1\r\n\r\n");
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_for(lock, std::chrono::seconds(30), [&] { return slow_entered_; })) {
      ::close(fd);
      return -1;
    }
    return fd;
  }
  // Sends `request` on a new connection; returns all the server sends until
  // it closes.
  std::string Exchange(const std::string& request) {
    const int fd = Connect(server_->port());
    Send(fd, request);
    std::string resp = ReadAll(fd);
    ::close(fd);
    return resp;
  }
  // Lets the /slow handler answer.
  void ReleaseSlow() {
    std::lock_guard<std::mutex> lock(mu_);
    slow_released_ = true;
    cv_.notify_all();
  }
  // Options whose accept thread answers GET /health itself; a connection's
  // first bytes are awaited there for first_bytes_wait_ms.
  static HttpServerOptions HealthOnAcceptThread(int first_bytes_wait_ms) {
    HttpServerOptions o;
    o.answer_on_accept = [](const HttpRequest& r) { return r.path == "/health"; };
    o.first_bytes_wait_ms = first_bytes_wait_ms;
    return o;
  }

  std::unique_ptr<HttpServer> server_;
  std::atomic<bool> gone_seen_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  bool flood_done_ = false;  // guarded by mu_
  bool slow_entered_ = false;
  bool slow_released_ = false;
  bool flood_refused_ = false;
  int64_t flood_bytes_ = 0;
};

// Connections that send a request head one byte at a time, round-robin,
// from a background thread, until destroyed.
class Tricklers {
 public:
  Tricklers(int port, int n) {
    for (int i = 0; i < n; ++i) fds_.push_back(Connect(port));
    thread_ = std::thread([this] {
      const std::string head = "GET /slow-loris HTTP/1.1\r\nX-Pad: " + std::string(4000, 'a');
      for (size_t pos = 0; !stop_.load(); pos = (pos + 1) % head.size()) {
        for (int fd : fds_) ::send(fd, head.data() + pos, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
        std::this_thread::sleep_for(std::chrono::milliseconds(20));  // pacing, not ordering
      }
    });
  }
  ~Tricklers() {
    stop_.store(true);
    thread_.join();
    for (int fd : fds_) ::close(fd);
  }

 private:
  std::vector<int> fds_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// Expects every needle in text.
void ExpectHas(const std::string& text, std::initializer_list<const char*> needles) {
  for (const char* needle : needles) {
    EXPECT_NE(text.find(needle), std::string::npos) << needle << " not in " << text;
  }
}

// Waits (polling a condition, up to 60 s) until the server holds n connections.
bool WaitForConnections(const HttpServer& server, int n) {
  for (int i = 0; i < 6000 && server.num_connections() < n; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return server.num_connections() >= n;
}

TEST_F(HttpServerTest, ServesKeepAliveAndPipelinedRequests) {
  StartServer();
  int fd = Connect(server_->port());
  Send(fd, "GET /a HTTP/1.1\r\nHost: x\r\n\r\n");
  std::string r1 = ReadUntil(fd, "GET /a ");
  ExpectHas(r1, {"HTTP/1.1 200 OK\r\n", "Content-Length: 7\r\n", "Connection: keep-alive"});
  Send(fd,
       "POST /b HTTP/1.1\r\nContent-Length: 2\r\n\r\nhiGET /c HTTP/1.1\r\nConnection: "
       "close\r\n\r\n");
  std::string rest = ReadAll(fd);
  ExpectHas(rest, {"POST /b hi", "GET /c ", "Connection: close"});
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
  EXPECT_NE(r.find("\r\n\r\n127.0.0.1:" + std::to_string(ntohs(local.sin_port))), std::string::npos)
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
      {"POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", "HTTP/1.1 501 "},
      {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n65\r\n", "HTTP/1.1 413 "},
      {"BROKEN\r\n\r\n", "HTTP/1.1 400 "},
      {"GET / HTTP/1.1\r\nX: " + std::string(1000, 'a') + "\r\n\r\n", "HTTP/1.1 431 "},
  };
  for (const Case& c : cases) {
    const std::string resp = Exchange(c.raw);
    EXPECT_EQ(resp.rfind(c.status_line, 0), 0u) << resp;
    EXPECT_NE(resp.find("{\"error\":{\"message\":"), std::string::npos) << resp;
  }
}

TEST_F(HttpServerTest, StreamsChunkedServerSentEvents) {
  StartServer();
  int fd = Connect(server_->port());
  Send(fd, "GET /stream HTTP/1.1\r\n\r\n");
  std::string resp = ReadUntil(fd, "0\r\n\r\n");
  ExpectHas(resp, {"Content-Type: text/event-stream\r\n", "Transfer-Encoding: chunked\r\n",
                   "f\r\ndata: {\"i\":0}\n\n\r\n", "e\r\ndata: [DONE]\n\n\r\n0\r\n\r\n"});
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
  const int first = StartSlowRequest();  // the first connection is busy in its handler
  ASSERT_GE(first, 0);
  int second = Connect(server_->port());
  std::string resp = ReadAll(second);
  // Busy with a request, the first connection is not evicted: 503.
  EXPECT_EQ(resp.rfind("HTTP/1.1 503 ", 0), 0u) << resp;
  ReleaseSlow();
  EXPECT_NE(ReadUntil(first, "slow").find("slow"), std::string::npos);
  ::close(first);
  ::close(second);
}

TEST_F(HttpServerTest, HealthCheckIsAnsweredOnTheAcceptThreadEvenWhenEveryConnectionIsBusy) {
  HttpServerOptions o = HealthOnAcceptThread(60000);  // the request below surely comes within it
  o.max_connections = 1;
  StartServer(o);
  const int first = StartSlowRequest();  // the only connection slot is busy
  ASSERT_GE(first, 0);
  int health = Connect(server_->port());
  Send(health, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
  std::string resp = ReadAll(health);  // the server closes after the answer
  EXPECT_EQ(resp.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << resp;
  EXPECT_NE(resp.find("Connection: close\r\n"), std::string::npos) << resp;
  EXPECT_NE(resp.find("\r\n\r\nGET /health "), std::string::npos) << resp;
  EXPECT_EQ(server_->num_evicted(), 0);
  EXPECT_EQ(server_->num_connections(), 1);
  ReleaseSlow();
  EXPECT_NE(ReadUntil(first, "slow").find("slow"), std::string::npos);
  ::close(first);
  ::close(health);
}

TEST_F(HttpServerTest, OnlyAWholeFirstPickedRequestIsAnsweredOnTheAcceptThread) {
  StartServer(HealthOnAcceptThread(50));
  // Not picked: a connection thread answers, keep-alive.
  int other = Connect(server_->port());
  Send(other, "GET /a HTTP/1.1\r\n\r\n");
  EXPECT_NE(ReadUntil(other, "GET /a ").find("Connection: keep-alive"), std::string::npos);
  // Picked, but its head comes in two parts: the connection's thread
  // answers it and the next one on the same connection (keep-alive).
  int split = Connect(server_->port());
  Send(split, "GET /health HTTP/1.1\r\nHost: x\r\n");
  ASSERT_TRUE(WaitForConnections(*server_, 2));
  Send(split, "\r\n");
  std::string r1 = ReadUntil(split, "GET /health ");
  EXPECT_NE(r1.find("Connection: keep-alive"), std::string::npos) << r1;
  Send(split, "GET /health HTTP/1.1\r\n\r\n");
  std::string r2 = ReadUntil(split, "GET /health ");
  EXPECT_NE(r2.find("Connection: keep-alive"), std::string::npos) << r2;
  // A silent connection gets its thread after first_bytes_wait_ms.
  int silent = Connect(server_->port());
  ASSERT_TRUE(WaitForConnections(*server_, 3));
  Send(silent, "GET /b HTTP/1.1\r\n\r\n");
  EXPECT_NE(ReadUntil(silent, "GET /b ").find("Connection: keep-alive"), std::string::npos);
  ::close(other);
  ::close(split);
  ::close(silent);
}

TEST_F(HttpServerTest, StopClosesAConnectionWaitingForItsFirstBytes) {
  StartServer(HealthOnAcceptThread(60000));
  int silent = Connect(server_->port());
  // Answered while the other waits: the accept thread is not stuck on it.
  int health = Connect(server_->port());
  Send(health, "GET /health HTTP/1.1\r\n\r\n");
  EXPECT_EQ(ReadAll(health).rfind("HTTP/1.1 200 OK\r\n", 0), 0u);
  EXPECT_EQ(server_->num_connections(), 0);  // the silent one is still on the accept thread
  auto t0 = std::chrono::steady_clock::now();
  server_->Stop(std::chrono::milliseconds(3000));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(2000));
  std::string resp = ReadAll(silent);  // closed (503: the server is stopping)
  EXPECT_EQ(resp.rfind("HTTP/1.1 503 ", 0), 0u) << resp;
  ::close(silent);
  ::close(health);
}

TEST_F(HttpServerTest, StalledRequestGets408) {
  HttpServerOptions o;
  o.body_timeout_ms = 300;
  StartServer(o);
  const std::string resp = Exchange("POST / HTTP/1.1\r\nContent-Length: 10\r\n\r\nabc");
  EXPECT_EQ(resp.rfind("HTTP/1.1 408 ", 0), 0u) << resp;
}

TEST_F(HttpServerTest, TricklingHeadGets408) {
  HttpServerOptions o;
  o.header_timeout_ms = 300;
  StartServer(o);
  int fd = Connect(server_->port());
  Send(fd, "GET / HTTP/1.1\r\nX-Slow: ");
  // One byte at a time, never finishing the head: the head deadline runs
  // from the first byte, not from the last.
  std::string resp;
  for (int i = 0; i < 100; ++i) {
    if (::send(fd, "a", 1, MSG_NOSIGNAL) != 1) break;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 50) > 0) {
      resp = ReadAll(fd);
      break;
    }
  }
  EXPECT_EQ(resp.rfind("HTTP/1.1 408 ", 0), 0u) << resp;
  EXPECT_NE(resp.find("headers did not arrive in time"), std::string::npos) << resp;
  ::close(fd);
}

TEST_F(HttpServerTest, AcceptsChunkedRequestBodiesWithinTheLimit) {
  HttpServerOptions o;
  o.limits.max_body_bytes = 16;
  StartServer(o);
  int fd = Connect(server_->port());
  Send(fd, "POST /echo HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n");
  Send(fd, "6\r\n world\r\n0\r\n\r\n");
  EXPECT_NE(ReadUntil(fd, "hello world").find("POST /echo hello world"), std::string::npos);
  Send(fd, "POST /echo HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n11\r\n");  // 17 > 16
  std::string resp = ReadAll(fd);
  EXPECT_NE(resp.find("HTTP/1.1 413 "), std::string::npos) << resp;
  ::close(fd);
}

// 1,000 connections trickling their heads do not keep a prompt client from
// being served (each connection has its own thread and deadline).
TEST_F(HttpServerTest, ThousandTricklingConnectionsDoNotBlockAPromptClient) {
  StartServer();
  Tricklers slow(server_->port(), 1000);
  ASSERT_TRUE(WaitForConnections(*server_, 1000));
  const auto t0 = std::chrono::steady_clock::now();
  const std::string resp = Exchange("GET /prompt HTTP/1.1\r\nConnection: close\r\n\r\n");
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(resp.rfind("HTTP/1.1 200 ", 0), 0u) << resp;
  EXPECT_NE(resp.find("GET /prompt"), std::string::npos);
  std::printf("prompt client answered in %.1f ms beside 1000 trickling connections\n", ms);
}

// At max_connections, a new client evicts the connection that has spent the
// longest on its head instead of being refused.
TEST_F(HttpServerTest, FullServerEvictsTheSlowestHeadForANewClient) {
  HttpServerOptions o;
  o.max_connections = 32;
  StartServer(o);
  Tricklers slow(server_->port(), 32);
  ASSERT_TRUE(WaitForConnections(*server_, 32));
  for (int i = 0; i < 3; ++i) {
    const std::string resp = Exchange("GET /prompt HTTP/1.1\r\nConnection: close\r\n\r\n");
    EXPECT_EQ(resp.rfind("HTTP/1.1 200 ", 0), 0u) << resp;
  }
  EXPECT_GE(server_->num_evicted(), 1);
}

// A client that stops reading its event stream: once stream_buffer_bytes are
// queued for it the exchange refuses further events (the handler would abort
// its request) without ever blocking in send (the send timeout is far away).
TEST_F(HttpServerTest, StalledStreamReaderIsCutAtItsBufferLimit) {
  HttpServerOptions o;
  o.stream_buffer_bytes = 256 * 1024;
  o.send_timeout_ms = 600000;
  StartServer(o);
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  int small = 4096;
  ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(server_->port());
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(fd, (sockaddr*)&a, sizeof(a)), 0);
  Send(fd, "GET /flood HTTP/1.1\r\n\r\n");  // and never read
  {
    std::unique_lock<std::mutex> lock(mu_);
    ASSERT_TRUE(cv_.wait_for(lock, std::chrono::seconds(60), [&] { return flood_done_; }));
    EXPECT_TRUE(flood_refused_);
    EXPECT_GE(flood_bytes_, (int64_t)o.stream_buffer_bytes);
    EXPECT_LT(flood_bytes_, 200000LL * 4096);
    std::printf("stalled reader cut after %lld bytes\n", (long long)flood_bytes_);
  }
  // Meanwhile the server serves others as usual.
  int other = Connect(server_->port());
  Send(other, "GET /other HTTP/1.1\r\nConnection: close\r\n\r\n");
  EXPECT_NE(ReadAll(other).find("GET /other"), std::string::npos);
  ::close(other);
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
