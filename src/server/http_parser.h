// HttpParser: an incremental HTTP/1.1 request parser for the server's own
// socket layer. Bytes are appended as they arrive (any split, any number of
// pipelined requests); Next() yields one complete request at a time and keeps
// the bytes that follow it for the next call.
//
// Accepted: request line "METHOD TARGET HTTP/1.x", headers, and a body framed
// by Content-Length or by "Transfer-Encoding: chunked" (decoded; chunk
// extensions and trailers are read and dropped; the decoded body counts
// against max_body_bytes). Rejected with an HTTP status (never a crash):
//   400 malformed request line / header / Content-Length / chunk framing,
//       or both Content-Length and Transfer-Encoding (request smuggling)
//   413 body over max_body_bytes       431 header block over max_header_bytes
//   501 a transfer coding other than chunked
//   505 a version other than HTTP/1.0 or HTTP/1.1
// After an error the parser stays in the error state (the connection closes).
//
// Thread rules: one parser per connection, used by that connection's thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tern {

struct HttpRequest {
  std::string method;   // "GET", "POST", ...
  std::string target;   // as sent: "/v1/models?x=1"
  std::string path;     // target without the query: "/v1/models"
  std::string version;  // "HTTP/1.1"
  std::vector<std::pair<std::string, std::string>> headers;  // names lowercased
  std::string body;
  bool keep_alive = true;  // HTTP/1.1 default unless "Connection: close"
  std::string remote_addr;  // the peer, "127.0.0.1:51234" or "[::1]:51234" (set by HttpServer)

  // The first header with this (lowercase) name, or "" when absent.
  std::string_view Header(std::string_view lowercase_name) const;
  bool HasHeader(std::string_view lowercase_name) const;
};

struct HttpLimits {
  size_t max_header_bytes = 16 * 1024;
  size_t max_body_bytes = 8 * 1024 * 1024;
};

class HttpParser {
 public:
  enum class Result { kNeedMore, kRequest, kError };

  explicit HttpParser(HttpLimits limits = {}) : limits_(limits) {}

  void Append(std::string_view bytes) { buffer_.append(bytes); }

  // Parses the next request from the buffered bytes. kRequest fills *out and
  // consumes its bytes; kNeedMore leaves the buffer as is; kError sets
  // error_status()/error_message().
  Result Next(HttpRequest* out);

  // True once the headers of the pending request are complete, it carries
  // "Expect: 100-continue" and its body has not fully arrived; the caller
  // answers "100 Continue" once (then calls MarkContinueSent()).
  bool WantsContinue() const { return wants_continue_ && !continue_sent_; }
  void MarkContinueSent() { continue_sent_ = true; }

  // True once the pending request's header block is complete (its body may
  // still be arriving); false between requests and while headers arrive.
  bool head_complete() const { return head_complete_; }

  // Bytes buffered but not yet returned as a request.
  size_t buffered_bytes() const { return buffer_.size(); }
  int error_status() const { return error_status_; }
  const std::string& error_message() const { return error_message_; }

 private:
  Result Fail(int status, std::string message);
  Result ParseHead(std::string_view head, HttpRequest* out);
  // Decodes chunks from chunk_pos_; kRequest once the last chunk and the
  // trailers are in (then the request's bytes end at chunk_pos_).
  Result ParseChunks();

  HttpLimits limits_;
  std::string buffer_;
  bool head_complete_ = false;
  // A chunked body being decoded: the parsed head, the decoded bytes so far
  // and where the next chunk-size line starts in buffer_.
  bool chunked_ = false;
  HttpRequest chunked_request_;
  std::string chunked_body_;
  size_t chunk_pos_ = 0;
  bool wants_continue_ = false;
  bool continue_sent_ = false;
  int error_status_ = 0;
  std::string error_message_;
};

}  // namespace tern
