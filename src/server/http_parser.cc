#include "server/http_parser.h"

#include <algorithm>
#include <cctype>

namespace tern {
namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = (char)std::tolower((unsigned char)c);
  return out;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

bool IsTokenChar(char c) {
  if (std::isalnum((unsigned char)c)) return true;
  return std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

bool IsToken(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), IsTokenChar);
}

// Parses a Content-Length value: decimal digits only, no sign, no overflow.
bool ParseLength(std::string_view s, uint64_t* out) {
  if (s.empty() || s.size() > 18) return false;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (uint64_t)(c - '0');
  }
  *out = v;
  return true;
}

// True when a comma-separated header value contains token (case-insensitive).
bool HasToken(std::string_view value, std::string_view token) {
  std::string v = Lower(value);
  size_t pos = 0;
  while (pos <= v.size()) {
    size_t comma = v.find(',', pos);
    if (comma == std::string::npos) comma = v.size();
    if (Trim(std::string_view(v).substr(pos, comma - pos)) == token) return true;
    pos = comma + 1;
  }
  return false;
}

}  // namespace

std::string_view HttpRequest::Header(std::string_view lowercase_name) const {
  for (const auto& [name, value] : headers) {
    if (name == lowercase_name) return value;
  }
  return {};
}

bool HttpRequest::HasHeader(std::string_view lowercase_name) const {
  for (const auto& h : headers) {
    if (h.first == lowercase_name) return true;
  }
  return false;
}

HttpParser::Result HttpParser::Fail(int status, std::string message) {
  error_status_ = status;
  error_message_ = std::move(message);
  return Result::kError;
}

HttpParser::Result HttpParser::ParseHead(std::string_view head, HttpRequest* out) {
  // head: "METHOD SP TARGET SP VERSION CRLF (NAME: VALUE CRLF)*" without the
  // final blank line.
  size_t eol = head.find("\r\n");
  std::string_view line = head.substr(0, eol);
  size_t sp1 = line.find(' ');
  size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos) {
    return Fail(400, "malformed request line");
  }
  out->method = std::string(line.substr(0, sp1));
  out->target = std::string(line.substr(sp1 + 1, sp2 - sp1 - 1));
  out->version = std::string(line.substr(sp2 + 1));
  if (!IsToken(out->method)) return Fail(400, "malformed request method");
  if (out->target.empty() || (out->target[0] != '/' && out->target != "*")) {
    return Fail(400, "malformed request target");
  }
  if (out->version.rfind("HTTP/", 0) != 0) return Fail(400, "malformed HTTP version");
  if (out->version != "HTTP/1.1" && out->version != "HTTP/1.0") {
    return Fail(505, "HTTP version not supported: " + out->version);
  }
  out->path = out->target.substr(0, out->target.find('?'));
  out->headers.clear();
  size_t pos = eol == std::string_view::npos ? head.size() : eol + 2;
  while (pos < head.size()) {
    size_t end = head.find("\r\n", pos);
    if (end == std::string_view::npos) end = head.size();
    std::string_view h = head.substr(pos, end - pos);
    pos = end + 2;
    size_t colon = h.find(':');
    if (colon == std::string_view::npos || !IsToken(h.substr(0, colon))) {
      return Fail(400, "malformed header line");
    }
    out->headers.emplace_back(Lower(h.substr(0, colon)), std::string(Trim(h.substr(colon + 1))));
  }
  std::string_view connection = out->Header("connection");
  out->keep_alive = out->version == "HTTP/1.1" ? !HasToken(connection, "close")
                                               : HasToken(connection, "keep-alive");
  return Result::kRequest;
}

HttpParser::Result HttpParser::ParseChunks() {
  // chunk = size-hex [; ext] CRLF data CRLF; last-chunk = "0" [; ext] CRLF;
  // then trailer lines and a blank line.
  constexpr size_t kMaxSizeLine = 1024;  // size + extensions
  for (;;) {
    const size_t eol = buffer_.find("\r\n", chunk_pos_);
    if (eol == std::string::npos) {
      if (buffer_.size() - chunk_pos_ > kMaxSizeLine) return Fail(400, "chunk size line too long");
      return Result::kNeedMore;
    }
    if (eol - chunk_pos_ > kMaxSizeLine) return Fail(400, "chunk size line too long");
    std::string_view line = std::string_view(buffer_).substr(chunk_pos_, eol - chunk_pos_);
    line = Trim(line.substr(0, line.find(';')));
    if (line.empty() || line.size() > 15) return Fail(400, "malformed chunk size");
    uint64_t size = 0;
    for (char c : line) {
      const int d = std::isdigit((unsigned char)c) ? c - '0'
                    : (c >= 'a' && c <= 'f')      ? c - 'a' + 10
                    : (c >= 'A' && c <= 'F')      ? c - 'A' + 10
                                                  : -1;
      if (d < 0) return Fail(400, "malformed chunk size");
      size = size * 16 + (uint64_t)d;
    }
    if (size > limits_.max_body_bytes - chunked_body_.size()) {
      return Fail(413, "chunked request body exceeds the limit of " +
                           std::to_string(limits_.max_body_bytes) + " bytes");
    }
    if (size == 0) {
      // Trailers: header lines up to a blank line, within the header limit.
      const size_t trailers = eol + 2;
      size_t end = buffer_.compare(trailers, 2, "\r\n") == 0 ? trailers
                                                              : buffer_.find("\r\n\r\n", trailers);
      if (end == std::string::npos) {
        if (buffer_.size() - trailers > limits_.max_header_bytes) {
          return Fail(431, "request trailers exceed " + std::to_string(limits_.max_header_bytes) +
                               " bytes");
        }
        return Result::kNeedMore;
      }
      if (end != trailers) end += 2;  // the last trailer line's CRLF
      if (end - trailers > limits_.max_header_bytes) {
        return Fail(431, "request trailers exceed " + std::to_string(limits_.max_header_bytes) +
                             " bytes");
      }
      chunk_pos_ = end + 2;
      return Result::kRequest;
    }
    const size_t data = eol + 2;
    if (buffer_.size() < data + size + 2) return Result::kNeedMore;
    if (buffer_.compare(data + size, 2, "\r\n") != 0) return Fail(400, "chunk not followed by CRLF");
    chunked_body_.append(buffer_, data, size);
    chunk_pos_ = data + size + 2;
  }
}

HttpParser::Result HttpParser::Next(HttpRequest* out) {
  if (error_status_ != 0) return Result::kError;
  if (chunked_) {
    const Result r = ParseChunks();
    if (r != Result::kRequest) return r;
    chunked_request_.body = std::move(chunked_body_);
    buffer_.erase(0, chunk_pos_);
    *out = std::move(chunked_request_);
    chunked_ = false;
    chunked_request_ = HttpRequest{};
    chunked_body_.clear();
    chunk_pos_ = 0;
    head_complete_ = false;
    wants_continue_ = false;
    continue_sent_ = false;
    return Result::kRequest;
  }
  // Tolerate blank lines between pipelined requests (RFC 9112 section 2.2).
  size_t skip = 0;
  while (skip + 1 < buffer_.size() && buffer_[skip] == '\r' && buffer_[skip + 1] == '\n') skip += 2;
  if (skip > 0) buffer_.erase(0, skip);

  size_t head_end = buffer_.find("\r\n\r\n");
  if (head_end == std::string::npos) {
    if (buffer_.size() > limits_.max_header_bytes) {
      return Fail(431, "request header block exceeds " + std::to_string(limits_.max_header_bytes) +
                           " bytes");
    }
    return Result::kNeedMore;
  }
  if (head_end + 4 > limits_.max_header_bytes) {
    return Fail(
        431, "request header block exceeds " + std::to_string(limits_.max_header_bytes) + " bytes");
  }
  HttpRequest req;
  if (ParseHead(std::string_view(buffer_).substr(0, head_end), &req) == Result::kError) {
    return Result::kError;
  }
  head_complete_ = true;
  const size_t body_start = head_end + 4;
  if (req.HasHeader("transfer-encoding")) {
    if (req.HasHeader("content-length")) {
      return Fail(400, "a request may not carry both Content-Length and Transfer-Encoding");
    }
    std::string coding = Lower(Trim(req.Header("transfer-encoding")));
    int num_te = 0;
    for (const auto& h : req.headers) num_te += h.first == "transfer-encoding";
    if (num_te != 1 || coding != "chunked") {
      return Fail(501, "unsupported Transfer-Encoding '" + std::string(req.Header("transfer-encoding")) +
                           "'; only chunked is accepted");
    }
    wants_continue_ = HasToken(req.Header("expect"), "100-continue");
    chunked_ = true;
    chunked_request_ = std::move(req);
    chunk_pos_ = body_start;
    return Next(out);
  }
  uint64_t length = 0;
  int num_lengths = 0;
  for (const auto& [name, value] : req.headers) {
    if (name != "content-length") continue;
    uint64_t v = 0;
    if (!ParseLength(value, &v)) return Fail(400, "invalid Content-Length: '" + value + "'");
    if (num_lengths++ > 0 && v != length) return Fail(400, "conflicting Content-Length headers");
    length = v;
  }
  if (length > limits_.max_body_bytes) {
    return Fail(413, "request body of " + std::to_string(length) + " bytes exceeds the limit of " +
                         std::to_string(limits_.max_body_bytes) + " bytes");
  }
  if (buffer_.size() - body_start < length) {
    wants_continue_ = HasToken(req.Header("expect"), "100-continue");
    return Result::kNeedMore;
  }
  req.body = buffer_.substr(body_start, length);
  buffer_.erase(0, body_start + length);
  head_complete_ = false;
  wants_continue_ = false;
  continue_sent_ = false;
  *out = std::move(req);
  return Result::kRequest;
}

}  // namespace tern
