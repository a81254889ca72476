#include "hub/http_client.h"

#include <curl/curl.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>

namespace tern::hub {
namespace {

constexpr long kConnectTimeoutS = 30;
constexpr long kStallSeconds = 60;  // abort when under 1 byte/s for this long
constexpr size_t kErrorBodyBytes = 64 << 10;
constexpr const char* kUserAgent = "tern/0.1";

void GlobalInit() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

std::string Trim(std::string s) {
  while (!s.empty() && std::isspace((unsigned char)s.back())) s.pop_back();
  size_t i = 0;
  while (i < s.size() && std::isspace((unsigned char)s[i])) ++i;
  return s.substr(i);
}

// What the callbacks of one transfer share.
struct Transfer {
  CURL* curl = nullptr;
  HttpResponse* response = nullptr;
  // Download only:
  int fd = -1;
  int64_t offset = 0;
  bool checked_start = false;
  int write_errno = 0;     // set when writing the file failed
  bool bad_range = false;  // a 206 that does not start at offset
  const std::function<void(int64_t)>* on_progress = nullptr;
  size_t max_body_bytes = 0;
};

size_t OnHeader(char* data, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t n = size * count;
  std::string line(data, n);
  if (line.rfind("HTTP/", 0) == 0) {
    t->response->hops.emplace_back();
    return n;
  }
  const size_t colon = line.find(':');
  if (colon == std::string::npos || t->response->hops.empty()) return n;
  std::string name = line.substr(0, colon);
  for (char& c : name) c = (char)std::tolower((unsigned char)c);
  t->response->hops.back()[name] = Trim(line.substr(colon + 1));
  return n;
}

long CurrentStatus(CURL* curl) {
  long code = 0;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &code);
  return code;
}

size_t OnBodyToMemory(char* data, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t n = size * count;
  if (t->response->body.size() + n > t->max_body_bytes) return 0;  // fails the transfer
  t->response->body.append(data, n);
  return n;
}

// "bytes START-END/TOTAL" -> START, or -1.
int64_t ContentRangeStart(const std::string& value) {
  const size_t space = value.find(' ');
  if (value.rfind("bytes", 0) != 0 || space == std::string::npos) return -1;
  char* end = nullptr;
  const long long start = std::strtoll(value.c_str() + space + 1, &end, 10);
  return end && *end == '-' ? start : -1;
}

bool WriteAll(int fd, const char* data, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, data, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    data += w;
    n -= (size_t)w;
  }
  return true;
}

// Decides, on a response's first body bytes, where they go: the file from
// `offset` (206), the file from 0 (200), or the error body.
bool StartBody(Transfer* t, long status) {
  t->checked_start = true;
  if (status == 206) {
    t->bad_range = ContentRangeStart(t->response->Header("content-range")) != t->offset;
    return !t->bad_range;
  }
  if (status == 200 && t->offset > 0) {
    if (::ftruncate(t->fd, 0) != 0 || ::lseek(t->fd, 0, SEEK_SET) != 0) return false;
    t->offset = 0;
    t->response->restarted = true;
  }
  return true;
}

size_t OnBodyToFile(char* data, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t n = size * count;
  const long status = CurrentStatus(t->curl);
  if (status >= 300 && status < 400) return n;  // a redirect's own body
  if (status >= 400) {
    const size_t room = kErrorBodyBytes - std::min(kErrorBodyBytes, t->response->body.size());
    t->response->body.append(data, std::min(n, room));
    return n;
  }
  if (!t->checked_start && !StartBody(t, status)) return 0;
  if (!WriteAll(t->fd, data, n)) {
    t->write_errno = errno ? errno : EIO;
    return 0;
  }
  t->response->bytes_written += (int64_t)n;
  if (*t->on_progress) (*t->on_progress)(t->response->bytes_written);
  return n;
}

struct CurlDeleter {
  void operator()(CURL* c) const { curl_easy_cleanup(c); }
};
struct SlistDeleter {
  void operator()(curl_slist* l) const { curl_slist_free_all(l); }
};

// Runs one transfer with the options every request shares.
void Perform(const std::string& url, const std::string& token, Transfer* t,
             curl_write_callback on_body, const std::string& range) {
  GlobalInit();
  std::unique_ptr<CURL, CurlDeleter> curl(curl_easy_init());
  HttpResponse* r = t->response;
  if (!curl) {
    r->curl_code = CURLE_FAILED_INIT;
    r->curl_error = "libcurl could not start a transfer";
    return;
  }
  t->curl = curl.get();
  std::unique_ptr<curl_slist, SlistDeleter> headers;
  if (!token.empty()) {
    headers.reset(curl_slist_append(nullptr, ("Authorization: Bearer " + token).c_str()));
  }
  char error[CURL_ERROR_SIZE] = {0};
  CURL* c = curl.get();
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
  curl_easy_setopt(c, CURLOPT_MAXREDIRS, 10L);
  curl_easy_setopt(c, CURLOPT_USERAGENT, kUserAgent);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, kConnectTimeoutS);
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, kStallSeconds);
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, error);
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, OnHeader);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, t);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, t);
  if (headers) curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers.get());
  if (!range.empty()) curl_easy_setopt(c, CURLOPT_RANGE, range.c_str());
  const CURLcode code = curl_easy_perform(c);
  r->status = CurrentStatus(c);
  if (code != CURLE_OK) {
    r->curl_code = (int)code;
    r->curl_error = error[0] ? error : curl_easy_strerror(code);
  }
}

}  // namespace

std::string HttpResponse::Header(const std::string& lower_name) const {
  if (hops.empty()) return "";
  auto it = hops.back().find(lower_name);
  return it == hops.back().end() ? "" : it->second;
}

std::string HttpResponse::AnyHopHeader(const std::string& lower_name) const {
  for (const HeaderMap& hop : hops) {
    if (auto it = hop.find(lower_name); it != hop.end()) return it->second;
  }
  return "";
}

HttpClient::HttpClient(std::string bearer_token) : token_(std::move(bearer_token)) {}

HttpResponse HttpClient::Get(const std::string& url, size_t max_body_bytes) {
  HttpResponse r;
  Transfer t;
  t.response = &r;
  t.max_body_bytes = max_body_bytes;
  Perform(url, token_, &t, OnBodyToMemory, "");
  return r;
}

HttpResponse HttpClient::Download(const std::string& url, int fd, int64_t offset,
                                  const std::function<void(int64_t)>& on_progress) {
  HttpResponse r;
  Transfer t;
  t.response = &r;
  t.fd = fd;
  t.offset = offset;
  t.on_progress = &on_progress;
  Perform(url, token_, &t, OnBodyToFile, offset > 0 ? std::to_string(offset) + "-" : "");
  r.aborted_locally = t.write_errno != 0 || t.bad_range;
  if (t.write_errno != 0) {
    r.curl_error = std::string("cannot write the download: ") + std::strerror(t.write_errno);
  } else if (t.bad_range) {
    r.curl_error = "the server answered the Range request from another byte offset";
  }
  return r;
}

}  // namespace tern::hub
