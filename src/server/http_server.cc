#include "server/http_server.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <vector>
#include <cerrno>
#include <cstring>
#include <system_error>

#include "base/log.h"
#include "server/response_writer.h"

namespace tern {
namespace {

constexpr int kPollSliceMs = 200;
// Connections the accept thread holds at most while their first bytes are
// due (see AcceptLoop).
constexpr size_t kMaxFresh = 64;

bool SendAll(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix((size_t)n);
  }
  return true;
}

// The OpenAI error body (response_writer.h's, the one for every route).
std::string ErrorBody(int status, const std::string& message) {
  return ErrorJson(ApiError::Http(status, message));
}

std::string Head(int status, std::string_view content_type, size_t length, bool keep_alive) {
  std::string h = "HTTP/1.1 " + std::to_string(status) + " " + HttpReason(status) + "\r\n";
  h += "Content-Type: " + std::string(content_type) + "\r\n";
  h += "Content-Length: " + std::to_string(length) + "\r\n";
  h += keep_alive ? "Connection: keep-alive\r\n" : "Connection: close\r\n";
  h += "Server: tern\r\n\r\n";
  return h;
}

// "1.2.3.4:port" or "[::1]:port"; "" for other families.
std::string AddressText(const sockaddr_storage& addr) {
  char host[INET6_ADDRSTRLEN] = "";
  if (addr.ss_family == AF_INET) {
    const auto* a = (const sockaddr_in*)&addr;
    if (!::inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host))) return "";
    return std::string(host) + ":" + std::to_string(ntohs(a->sin_port));
  }
  if (addr.ss_family == AF_INET6) {
    const auto* a = (const sockaddr_in6*)&addr;
    if (!::inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host))) return "";
    return "[" + std::string(host) + "]:" + std::to_string(ntohs(a->sin6_port));
  }
  return "";
}

void SetTimeout(int fd, int option, int ms) {
  timeval tv{ms / 1000, (ms % 1000) * 1000};
  ::setsockopt(fd, SOL_SOCKET, option, &tv, sizeof(tv));
}

// HttpExchange over one connected socket. Plain responses are sent blocking
// (bounded by SO_SNDTIMEO). Event streams never block the handler: each event
// is sent with MSG_DONTWAIT and what the socket does not take waits in
// pending_, flushed before the next event and on ClientGone(); a client whose
// backlog passes stream_buffer_bytes stops reading, so the stream breaks and
// the handler aborts its request.
class SocketExchange : public HttpExchange {
 public:
  SocketExchange(int fd, size_t stream_buffer_bytes, int send_timeout_ms)
      : fd_(fd), stream_buffer_bytes_(stream_buffer_bytes), send_timeout_ms_(send_timeout_ms) {}

  void Reset(const HttpRequest& request, bool keep_alive) {
    keep_alive_ = keep_alive;
    head_only_ = request.method == "HEAD";
    http10_ = request.version == "HTTP/1.0";
    answered_ = false;
    streaming_ = false;
    pending_.clear();
  }
  bool answered() const { return answered_; }
  // The connection cannot carry another request.
  bool must_close() const { return broken_ || !keep_alive_; }

  void Respond(int status, std::string_view content_type, std::string_view body) override {
    if (answered_) return;
    answered_ = true;
    std::string out = Head(status, content_type, body.size(), keep_alive_);
    if (!head_only_) out.append(body);
    if (!SendAll(fd_, out)) broken_ = true;
  }

  bool BeginEventStream() override {
    if (answered_) return false;
    answered_ = streaming_ = true;
    if (http10_) keep_alive_ = false;  // no chunked framing: the close ends the body
    std::string h =
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
        "Cache-Control: no-cache\r\nX-Accel-Buffering: no\r\n";
    h += http10_ ? "Connection: close\r\n" : "Transfer-Encoding: chunked\r\n";
    if (!http10_) h += keep_alive_ ? "Connection: keep-alive\r\n" : "Connection: close\r\n";
    h += "Server: tern\r\n\r\n";
    if (!SendAll(fd_, h)) broken_ = true;
    return !broken_;
  }

  bool SendEvent(std::string_view data) override {
    if (broken_ || !streaming_) return false;
    std::string payload = "data: ";
    payload.append(data);
    payload += "\n\n";
    if (!http10_) {
      char size[32];
      std::snprintf(size, sizeof(size), "%zx\r\n", payload.size());
      payload = size + payload + "\r\n";
    }
    pending_ += payload;
    FlushPending();
    if (!broken_ && pending_.size() > stream_buffer_bytes_) {
      TERN_LOG_WARN("http: client stopped reading its event stream (%zu bytes pending); "
                    "aborting the request", pending_.size());
      broken_ = true;
    }
    return !broken_;
  }

  void EndEventStream() override {
    if (broken_ || !streaming_) return;
    streaming_ = false;
    if (!http10_) pending_ += "0\r\n\r\n";
    // The tail waits for the client (bounded by the send timeout).
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(send_timeout_ms_);
    while (!broken_ && !pending_.empty()) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      pollfd p{fd_, POLLOUT, 0};
      if (left.count() <= 0 || ::poll(&p, 1, (int)std::min<int64_t>(left.count(), kPollSliceMs)) < 0) {
        if (errno == EINTR && left.count() > 0) continue;
        broken_ = true;
        break;
      }
      FlushPending();
    }
    pending_.clear();
  }

  bool ClientGone() override {
    if (broken_) return true;
    if (!pending_.empty()) FlushPending();
    if (broken_) return true;
    pollfd p{fd_, POLLRDHUP, 0};
    if (::poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL))) {
      broken_ = true;
    }
    return broken_;
  }

 private:
  // Sends what the socket takes now; a hard error breaks the connection.
  void FlushPending() {
    size_t sent = 0;
    while (sent < pending_.size()) {
      const ssize_t n = ::send(fd_, pending_.data() + sent, pending_.size() - sent,
                               MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        sent += (size_t)n;
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      broken_ = true;
      break;
    }
    pending_.erase(0, sent);
  }

  int fd_;
  size_t stream_buffer_bytes_;
  int send_timeout_ms_;
  std::string pending_;  // stream bytes the socket has not taken yet
  bool keep_alive_ = true;
  bool head_only_ = false;
  bool http10_ = false;
  bool answered_ = false;
  bool streaming_ = false;
  bool broken_ = false;
};

}  // namespace

const char* HttpReason(int status) {
  switch (status) {
    case 100:
      return "Continue";
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 411:
      return "Length Required";
    case 413:
      return "Content Too Large";
    case 429:
      return "Too Many Requests";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 503:
      return "Service Unavailable";
    case 505:
      return "HTTP Version Not Supported";
    default:
      return "Unknown";
  }
}

HttpServer::HttpServer(HttpServerOptions options, HttpHandler handler)
    : options_(std::move(options)), handler_(std::move(handler)) {}

HttpServer::~HttpServer() { Stop(std::chrono::milliseconds(5000)); }

Status HttpServer::Listen() {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  const std::string where = options_.host + ":" + std::to_string(options_.port);
  int rc =
      ::getaddrinfo(options_.host.c_str(), std::to_string(options_.port).c_str(), &hints, &res);
  if (rc != 0) return InvalidArgument("cannot resolve " + where + ": " + ::gai_strerror(rc));
  std::string last_error = "no address";
  for (addrinfo* a = res; a; a = a->ai_next) {
    int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, options_.backlog) == 0) {
      sockaddr_storage addr{};
      socklen_t len = sizeof(addr);
      ::getsockname(fd, (sockaddr*)&addr, &len);
      port_ = ntohs(addr.ss_family == AF_INET6 ? ((sockaddr_in6*)&addr)->sin6_port
                                               : ((sockaddr_in*)&addr)->sin_port);
      listen_fd_ = fd;
      break;
    }
    last_error = std::strerror(errno);
    ::close(fd);
  }
  ::freeaddrinfo(res);
  if (listen_fd_ < 0) return Unavailable("cannot listen on " + where + ": " + last_error);
  return Status::Ok();
}

void HttpServer::Start() {
  starter_thread_ = std::thread([this] { StarterLoop(); });
  accept_thread_ = std::thread([this] { AcceptLoop(); });
}

void HttpServer::RejectBusy(int fd) {
  SetTimeout(fd, SO_SNDTIMEO, 1000);
  std::string body =
      ErrorBody(503, "too many connections (limit " + std::to_string(options_.max_connections) +
                         "); retry later");
  SendAll(fd, Head(503, "application/json", body.size(), false) + body);
  ::close(fd);
}

// Marks fd's connection as reading a request head (or waiting for one) since
// now, or as past its head (busy); only the former may be evicted.
void HttpServer::SetReadingHead(int fd, bool reading_head) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = conns_.find(fd);
  if (it == conns_.end()) return;
  it->second.reading_head = reading_head;
  it->second.since = std::chrono::steady_clock::now();
}

bool HttpServer::EvictSlowestHeadLocked() {
  auto victim = conns_.end();
  for (auto it = conns_.begin(); it != conns_.end(); ++it) {
    if (!it->second.reading_head || it->second.evicted) continue;
    if (victim == conns_.end() || it->second.since < victim->second.since) victim = it;
  }
  if (victim == conns_.end()) return false;
  victim->second.evicted = true;
  ::shutdown(victim->first, SHUT_RDWR);  // its thread sees EOF and closes it
  ++num_evicted_;
  return true;
}

void HttpServer::AcceptLoop() {
  using Clock = std::chrono::steady_clock;
  // With answer_on_accept, a connection whose first bytes have not arrived
  // yet waits here (polled with the listening socket) up to
  // first_bytes_wait_ms: a health check is still answered on this thread
  // when its request comes just after its connection. Silent connections
  // then go to the starter as usual.
  struct Fresh {
    int fd;
    std::string remote;
    Clock::time_point deadline;
  };
  std::vector<Fresh> fresh;
  std::vector<pollfd> polled;
  while (!stopping_.load()) {
    polled.assign(1, pollfd{listen_fd_, POLLIN, 0});
    int timeout_ms = kPollSliceMs;
    const auto now = Clock::now();
    for (const Fresh& f : fresh) {
      polled.push_back(pollfd{f.fd, POLLIN, 0});
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(f.deadline - now).count();
      timeout_ms = std::clamp<int>((int)left, 0, timeout_ms);
    }
    if (::poll(polled.data(), polled.size(), timeout_ms) < 0) continue;
    const auto after_poll = Clock::now();
    for (size_t i = fresh.size(); i-- > 0;) {
      if (polled[i + 1].revents == 0 && after_poll < fresh[i].deadline) continue;
      Admit(fresh[i].fd, std::move(fresh[i].remote));
      fresh.erase(fresh.begin() + (ptrdiff_t)i);
    }
    if (!(polled[0].revents & POLLIN)) continue;
    sockaddr_storage peer{};
    socklen_t peer_len = sizeof(peer);
    int fd = ::accept4(listen_fd_, (sockaddr*)&peer, &peer_len, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE)
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      continue;
    }
    std::string remote = AddressText(peer);
    if (options_.answer_on_accept && fresh.size() < kMaxFresh) {
      char byte;
      const ssize_t n = ::recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        fresh.push_back(Fresh{fd, std::move(remote),
                              after_poll + std::chrono::milliseconds(options_.first_bytes_wait_ms)});
        continue;
      }
    }
    Admit(fd, std::move(remote));
  }
  for (Fresh& f : fresh) Admit(f.fd, std::move(f.remote));  // stopping: rejected
}

void HttpServer::Admit(int fd, std::string remote) {
  if (options_.answer_on_accept && !stopping_.load() && AnswerOnAccept(fd, remote)) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    int live = 0;  // connections not already on their way out
    for (const auto& [cfd, c] : conns_) live += !c.evicted;
    // At the limit, the connection that has spent longest sending a
    // request head (or idling between requests) makes room: slow or idle
    // clients cannot lock out a client that sends its request promptly.
    if (stopping_.load() || (live >= options_.max_connections && !EvictSlowestHeadLocked())) {
      RejectBusy(fd);
      return;
    }
    conns_[fd] = Conn{true, false, std::chrono::steady_clock::now()};
    num_connections_.store((int)conns_.size());
    to_start_.emplace_back(fd, std::move(remote));
  }
  start_cv_.notify_one();
}

// Starts a thread for each accepted connection, in order; after Stop() has
// joined the accept thread, starts what is left and exits.
void HttpServer::StarterLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    start_cv_.wait(lock, [&] { return !to_start_.empty() || starter_stop_; });
    if (to_start_.empty()) return;
    auto [fd, remote] = std::move(to_start_.front());
    to_start_.pop_front();
    lock.unlock();
    try {
      std::thread([this, fd, remote] { ServeConnection(fd, remote); }).detach();
      lock.lock();
    } catch (const std::system_error& e) {  // out of threads: answer 503
      TERN_LOG_WARN("http: cannot start a connection thread: %s", e.what());
      lock.lock();
      conns_.erase(fd);
      num_connections_.store((int)conns_.size());
      RejectBusy(fd);
      all_closed_.notify_all();
    }
  }
}

bool HttpServer::AnswerOnAccept(int fd, const std::string& remote_addr) {
  // Peeked, not read: a request that is not picked (or not whole yet)
  // stays in the socket for the connection's thread.
  char buf[4096];
  const ssize_t n = ::recv(fd, buf, sizeof(buf), MSG_PEEK | MSG_DONTWAIT);
  if (n <= 0) return false;
  HttpParser parser(options_.limits);
  parser.Append(std::string_view(buf, (size_t)n));
  HttpRequest request;
  if (parser.Next(&request) != HttpParser::Result::kRequest || parser.buffered_bytes() != 0 ||
      !options_.answer_on_accept(request)) {
    return false;
  }
  if (::recv(fd, buf, (size_t)n, MSG_DONTWAIT) != n) {  // cannot happen: n bytes are queued
    ::close(fd);
    return true;
  }
  request.remote_addr = remote_addr;
  SetTimeout(fd, SO_SNDTIMEO, 1000);  // a small answer into an empty send buffer
  SocketExchange exchange(fd, options_.stream_buffer_bytes, options_.send_timeout_ms);
  exchange.Reset(request, /*keep_alive=*/false);
  try {
    handler_(request, exchange);
  } catch (const std::exception& e) {
    TERN_LOG_ERROR("http: handler failed on %s %s: %s", request.method.c_str(),
                   request.path.c_str(), e.what());
  }
  if (!exchange.answered()) {
    exchange.Respond(500, "application/json", ErrorBody(500, "the handler sent no response"));
  }
  ::close(fd);
  return true;
}

void HttpServer::ServeConnection(int fd, const std::string& remote_addr) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  SetTimeout(fd, SO_SNDTIMEO, options_.send_timeout_ms);
  HttpParser parser(options_.limits);
  SocketExchange exchange(fd, options_.stream_buffer_bytes, options_.send_timeout_ms);
  char buf[16384];
  using Clock = std::chrono::steady_clock;
  auto after = [](int ms) { return Clock::now() + std::chrono::milliseconds(ms); };
  // Phases of a request and their deadlines: waiting for its first byte
  // (idle_timeout_ms, then close quietly), its head (header_timeout_ms from
  // the first byte), its body (body_timeout_ms from the end of the head);
  // a missed head or body deadline answers 408.
  enum class Phase { kIdle, kHead, kBody };
  Phase phase = Phase::kIdle;
  auto deadline = after(options_.idle_timeout_ms);
  auto enter = [&](Phase next) {
    if (next == phase) return;
    SetReadingHead(fd, next != Phase::kBody);
    phase = next;
    deadline = after(next == Phase::kIdle   ? options_.idle_timeout_ms
                     : next == Phase::kHead ? options_.header_timeout_ms
                                            : options_.body_timeout_ms);
  };
  for (;;) {
    HttpRequest request;
    HttpParser::Result result = parser.Next(&request);
    if (result == HttpParser::Result::kError) {
      std::string body = ErrorBody(parser.error_status(), parser.error_message());
      SendAll(fd, Head(parser.error_status(), "application/json", body.size(), false) + body);
      break;
    }
    if (result == HttpParser::Result::kRequest) {
      SetReadingHead(fd, false);
      request.remote_addr = remote_addr;
      exchange.Reset(request, request.keep_alive && !stopping_.load());
      try {
        handler_(request, exchange);
      } catch (const std::exception& e) {  // a library threw: answer 500, never crash
        TERN_LOG_ERROR("http: handler failed on %s %s: %s", request.method.c_str(),
                       request.path.c_str(), e.what());
        exchange.Respond(500, "application/json", ErrorBody(500, "internal error"));
        break;
      }
      if (!exchange.answered()) {
        exchange.Respond(500, "application/json", ErrorBody(500, "the handler sent no response"));
      }
      if (exchange.must_close() || stopping_.load()) break;
      phase = Phase::kBody;  // forces enter() to reset the deadline
      enter(parser.buffered_bytes() == 0 ? Phase::kIdle : Phase::kHead);
      continue;
    }
    if (parser.head_complete()) enter(Phase::kBody);
    if (parser.WantsContinue()) {
      if (!SendAll(fd, "HTTP/1.1 100 Continue\r\n\r\n")) break;
      parser.MarkContinueSent();
    }
    if (phase == Phase::kIdle && stopping_.load()) break;
    if (Clock::now() > deadline) {
      if (phase != Phase::kIdle) {
        std::string body = ErrorBody(408, phase == Phase::kHead
                                              ? "the request headers did not arrive in time"
                                              : "the request body did not arrive in time");
        SendAll(fd, Head(408, "application/json", body.size(), false) + body);
      }
      break;
    }
    pollfd p{fd, POLLIN, 0};
    int ready = ::poll(&p, 1, kPollSliceMs);
    if (ready < 0 && errno != EINTR) break;
    if (ready <= 0) continue;
    ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) break;
    parser.Append(std::string_view(buf, (size_t)n));
    if (phase == Phase::kIdle) enter(Phase::kHead);
  }
  std::lock_guard<std::mutex> lock(mu_);
  ::close(fd);
  conns_.erase(fd);
  num_connections_.store((int)conns_.size());
  all_closed_.notify_all();
}

void HttpServer::Stop(std::chrono::milliseconds grace) {
  stopping_.store(true);
  if (accept_thread_.joinable()) accept_thread_.join();
  {
    std::lock_guard<std::mutex> lock(mu_);
    starter_stop_ = true;
  }
  start_cv_.notify_all();
  if (starter_thread_.joinable()) starter_thread_.join();
  if (listen_fd_ >= 0) {
    ::close(listen_fd_);
    listen_fd_ = -1;
  }
  std::unique_lock<std::mutex> lock(mu_);
  if (!all_closed_.wait_for(lock, grace, [&] { return conns_.empty(); })) {
    TERN_LOG_WARN("http: %zu connection(s) still busy after %lld ms; closing them",
                  conns_.size(), (long long)grace.count());
    for (const auto& [fd, c] : conns_) ::shutdown(fd, SHUT_RDWR);
    all_closed_.wait(lock, [&] { return conns_.empty(); });
  }
}

}  // namespace tern
