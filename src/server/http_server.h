// HttpServer: a small HTTP/1.1 server over POSIX sockets. One listening
// socket (SO_REUSEADDR, backlog 4096), one accept thread, and one thread per
// connection up to max_connections (beyond it: 503 and close). Connections
// are keep-alive; requests are parsed by HttpParser (limits -> 4xx and close);
// a request that stalls past read_timeout_ms gets 408, an idle keep-alive
// connection closes after idle_timeout_ms. Handlers answer through
// HttpExchange (Content-Length responses or chunked SSE streams); sends use
// MSG_NOSIGNAL and a send timeout, so a vanished client shows up as a failed
// send or as POLLRDHUP in ClientGone().
//
// Thread rules: Listen/Start/Stop from one controlling thread. The handler is
// called concurrently from connection threads.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "base/status.h"
#include "server/http_exchange.h"
#include "server/http_parser.h"

namespace tern {

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;  // 0: any free port (see port())
  int backlog = 4096;
  int max_connections = 1024;
  HttpLimits limits;
  int read_timeout_ms = 30000;  // a started request must arrive within this
  int idle_timeout_ms = 60000;  // keep-alive connection without a request
  int send_timeout_ms = 30000;  // a client not reading is dropped after this
};

using HttpHandler = std::function<void(const HttpRequest&, HttpExchange&)>;

class HttpServer {
 public:
  HttpServer(HttpServerOptions options, HttpHandler handler);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds and listens; an error names the address.
  Status Listen();
  // Starts the accept thread (after Listen).
  void Start();
  // Stops accepting, closes idle connections, and waits up to grace for
  // running handlers to finish; then shuts the remaining sockets down and
  // waits for their threads. Idempotent.
  void Stop(std::chrono::milliseconds grace);

  int port() const { return port_; }
  int num_connections() const { return num_connections_.load(); }

 private:
  void AcceptLoop();
  void ServeConnection(int fd, const std::string& remote_addr);
  void RejectBusy(int fd);

  const HttpServerOptions options_;
  HttpHandler handler_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::thread accept_thread_;
  std::atomic<bool> stopping_{false};
  std::atomic<int> num_connections_{0};
  std::mutex mu_;
  std::condition_variable all_closed_;
  std::set<int> open_fds_;  // guarded by mu_
};

// "OK", "Not Found", ... for the statuses the server sends.
const char* HttpReason(int status);

}  // namespace tern
