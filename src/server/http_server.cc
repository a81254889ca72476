#include "server/http_server.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <system_error>

#include "base/log.h"

namespace tern {
namespace {

constexpr int kPollSliceMs = 200;

bool SendAll(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix((size_t)n);
  }
  return true;
}

std::string ErrorBody(int status, const std::string& message) {
  const char* type = status == 503   ? "service_unavailable"
                     : status >= 500 ? "internal_error"
                                     : "invalid_request_error";
  nlohmann::ordered_json j = {
      {"error", {{"message", message}, {"type", type}, {"param", nullptr}, {"code", nullptr}}}};
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
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

// HttpExchange over one connected socket.
class SocketExchange : public HttpExchange {
 public:
  explicit SocketExchange(int fd) : fd_(fd) {}

  void Reset(const HttpRequest& request, bool keep_alive) {
    keep_alive_ = keep_alive;
    head_only_ = request.method == "HEAD";
    http10_ = request.version == "HTTP/1.0";
    answered_ = false;
    streaming_ = false;
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
    if (!SendAll(fd_, payload)) broken_ = true;
    return !broken_;
  }

  void EndEventStream() override {
    if (broken_ || !streaming_) return;
    streaming_ = false;
    if (!http10_ && !SendAll(fd_, "0\r\n\r\n")) broken_ = true;
  }

  bool ClientGone() override {
    if (broken_) return true;
    pollfd p{fd_, POLLRDHUP, 0};
    if (::poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL))) {
      broken_ = true;
    }
    return broken_;
  }

 private:
  int fd_;
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

void HttpServer::AcceptLoop() {
  while (!stopping_.load()) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (::poll(&p, 1, kPollSliceMs) <= 0) continue;
    sockaddr_storage peer{};
    socklen_t peer_len = sizeof(peer);
    int fd = ::accept4(listen_fd_, (sockaddr*)&peer, &peer_len, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE)
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      continue;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_.load() || (int)open_fds_.size() >= options_.max_connections) {
        RejectBusy(fd);
        continue;
      }
      open_fds_.insert(fd);
      num_connections_.store((int)open_fds_.size());
    }
    try {
      std::thread([this, fd, remote = AddressText(peer)] { ServeConnection(fd, remote); })
          .detach();
    } catch (const std::system_error& e) {  // out of threads: answer 503
      TERN_LOG_WARN("http: cannot start a connection thread: %s", e.what());
      std::lock_guard<std::mutex> lock(mu_);
      open_fds_.erase(fd);
      num_connections_.store((int)open_fds_.size());
      RejectBusy(fd);
    }
  }
}

void HttpServer::ServeConnection(int fd, const std::string& remote_addr) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  SetTimeout(fd, SO_SNDTIMEO, options_.send_timeout_ms);
  HttpParser parser(options_.limits);
  SocketExchange exchange(fd);
  char buf[16384];
  auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(options_.idle_timeout_ms);
  bool waiting_for_start = true;  // no byte of the next request yet
  for (;;) {
    HttpRequest request;
    HttpParser::Result result = parser.Next(&request);
    if (result == HttpParser::Result::kError) {
      std::string body = ErrorBody(parser.error_status(), parser.error_message());
      SendAll(fd, Head(parser.error_status(), "application/json", body.size(), false) + body);
      break;
    }
    if (result == HttpParser::Result::kRequest) {
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
      waiting_for_start = parser.buffered_bytes() == 0;
      deadline = std::chrono::steady_clock::now() +
                 std::chrono::milliseconds(waiting_for_start ? options_.idle_timeout_ms
                                                             : options_.read_timeout_ms);
      continue;
    }
    if (parser.WantsContinue()) {
      if (!SendAll(fd, "HTTP/1.1 100 Continue\r\n\r\n")) break;
      parser.MarkContinueSent();
    }
    if (waiting_for_start && stopping_.load()) break;
    if (std::chrono::steady_clock::now() > deadline) {
      if (!waiting_for_start) {
        std::string body = ErrorBody(408, "the request did not arrive in time");
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
    if (waiting_for_start) {
      waiting_for_start = false;
      deadline =
          std::chrono::steady_clock::now() + std::chrono::milliseconds(options_.read_timeout_ms);
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  ::close(fd);
  open_fds_.erase(fd);
  num_connections_.store((int)open_fds_.size());
  all_closed_.notify_all();
}

void HttpServer::Stop(std::chrono::milliseconds grace) {
  stopping_.store(true);
  if (accept_thread_.joinable()) accept_thread_.join();
  if (listen_fd_ >= 0) {
    ::close(listen_fd_);
    listen_fd_ = -1;
  }
  std::unique_lock<std::mutex> lock(mu_);
  if (!all_closed_.wait_for(lock, grace, [&] { return open_fds_.empty(); })) {
    TERN_LOG_WARN("http: %zu connection(s) still busy after %lld ms; closing them",
                  open_fds_.size(), (long long)grace.count());
    for (int fd : open_fds_) ::shutdown(fd, SHUT_RDWR);
    all_closed_.wait(lock, [&] { return open_fds_.empty(); });
  }
}

}  // namespace tern
