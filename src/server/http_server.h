// HttpServer: a small HTTP/1.1 server over POSIX sockets. One listening
// socket (SO_REUSEADDR, backlog 4096), one accept thread, and one thread per
// connection up to max_connections. Connections are keep-alive; requests are
// parsed by HttpParser (limits -> 4xx and close).
//
// Slow and hostile clients: a request's head must arrive within
// header_timeout_ms of its first byte and its body within body_timeout_ms of
// the head (else 408 and close); an idle keep-alive connection closes after
// idle_timeout_ms. At max_connections a new connection evicts the one that
// has spent longest reading a request head or idling (slowloris clients
// cannot lock out prompt ones); only when every connection is busy with a
// request is the newcomer answered 503. Handlers answer through HttpExchange
// (Content-Length responses or chunked SSE streams); plain responses use a
// send timeout, event streams never block the handler: a client that stops
// reading breaks its stream once stream_buffer_bytes are queued for it, so
// the handler aborts the request. Sends use MSG_NOSIGNAL; a vanished client
// shows up as a failed send or as POLLRDHUP in ClientGone().
//
// The accept thread only accepts: a connection thread is started by a
// starter thread (starting a thread costs ~0.15 ms of CPU on a small VM, and
// a burst of connections must not hold up accepting). A request picked by
// answer_on_accept (a health check) that arrived whole with its connection
// is answered on the accept thread itself, before connections still waiting
// for their threads, and even when every connection slot is busy (a
// connection whose first bytes are not there yet waits on the accept thread
// for them, up to first_bytes_wait_ms, before it gets a thread).
//
// Thread rules: Listen/Start/Stop from one controlling thread. The handler is
// called concurrently from connection threads.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <map>
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
  int header_timeout_ms = 10000;  // first byte of a request -> end of its head
  int body_timeout_ms = 30000;    // end of the head -> end of the body
  int idle_timeout_ms = 60000;    // keep-alive connection without a request
  int send_timeout_ms = 30000;    // a plain response's client not reading
  // An event stream's bytes queued beyond what the socket took; past this
  // the client counts as gone (its request is aborted).
  size_t stream_buffer_bytes = 1 << 20;
  // Picks requests answered on the accept thread (see above); the handler
  // must answer them at once (no event stream, no waiting), and their
  // connection closes after the answer. Empty: none.
  std::function<bool(const HttpRequest&)> answer_on_accept;
  // With answer_on_accept: how long a new connection may wait on the accept
  // thread for its first bytes before it gets a thread anyway.
  int first_bytes_wait_ms = 100;
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
  // Connections closed to make room for a new one (see above).
  int64_t num_evicted() const { return num_evicted_.load(); }

 private:
  void AcceptLoop();
  // Answers fd's request on this thread (answer_on_accept) or registers fd
  // and queues it for the starter (or answers 503 when full).
  void Admit(int fd, std::string remote_addr);
  void StarterLoop();
  // True when fd's first request was picked by answer_on_accept and has
  // been answered (fd closed); false leaves fd and its bytes untouched.
  bool AnswerOnAccept(int fd, const std::string& remote_addr);
  void ServeConnection(int fd, const std::string& remote_addr);
  void RejectBusy(int fd);
  void SetReadingHead(int fd, bool reading_head);
  bool EvictSlowestHeadLocked();  // mu_ held

  struct Conn {
    bool reading_head;  // waiting for or reading a request head: evictable
    bool evicted;
    std::chrono::steady_clock::time_point since;
  };

  const HttpServerOptions options_;
  HttpHandler handler_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::thread accept_thread_;
  std::thread starter_thread_;
  std::atomic<bool> stopping_{false};
  std::atomic<int> num_connections_{0};
  std::atomic<int64_t> num_evicted_{0};
  std::mutex mu_;
  std::condition_variable all_closed_;
  std::map<int, Conn> conns_;  // by fd; guarded by mu_
  // Accepted connections (also in conns_) waiting for their thread; mu_.
  std::deque<std::pair<int, std::string>> to_start_;
  bool starter_stop_ = false;  // mu_
  std::condition_variable start_cv_;
};

// "OK", "Not Found", ... for the statuses the server sends.
const char* HttpReason(int status);

}  // namespace tern
