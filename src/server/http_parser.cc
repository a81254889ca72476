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

HttpParser::Result HttpParser::Next(HttpRequest* out) {
  if (error_status_ != 0) return Result::kError;
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
  if (req.HasHeader("transfer-encoding")) {
    return Fail(411,
                "chunked (Transfer-Encoding) request bodies are not supported; "
                "send the body with a Content-Length header");
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
  size_t body_start = head_end + 4;
  if (buffer_.size() - body_start < length) {
    wants_continue_ = HasToken(req.Header("expect"), "100-continue");
    return Result::kNeedMore;
  }
  req.body = buffer_.substr(body_start, length);
  buffer_.erase(0, body_start + length);
  wants_continue_ = false;
  continue_sent_ = false;
  *out = std::move(req);
  return Result::kRequest;
}

}  // namespace tern
