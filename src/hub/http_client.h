// HttpClient: the few HTTP GETs the hub needs, over libcurl. Redirects are
// followed (the hub sends file downloads to a CDN); a bearer token, when set,
// goes to the first host only (libcurl drops custom Authorization headers on
// a redirect to another host).
//
// Transport failures are not Statuses here but fields of the result, so the
// caller can tell "never connected" from "cut mid-transfer" and retry the
// latter with a Range request. One client per thread.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace tern::hub {

using HeaderMap = std::map<std::string, std::string>;  // names in lower case

struct HttpResponse {
  int curl_code = 0;       // 0: the transfer completed
  std::string curl_error;  // libcurl's message when curl_code != 0
  long status = 0;         // of the last response; 0 if none arrived
  // Headers of every response in the redirect chain, first to last.
  std::vector<HeaderMap> hops;
  std::string body;        // Get: the body; Download: an error status's body
  int64_t bytes_written = 0;  // Download: body bytes written to the file
  bool restarted = false;     // Download: the server ignored Range; file rewritten from 0
  bool aborted_locally = false;  // Download: stopped by a write error or a wrong Range

  bool transport_ok() const { return curl_code == 0; }
  // Whether the server sent anything (a cut transfer, not a failed connect).
  bool connected() const { return status != 0; }
  // A header of the last response ("" if absent).
  std::string Header(const std::string& lower_name) const;
  // The first value of a header across all hops ("" if absent).
  std::string AnyHopHeader(const std::string& lower_name) const;
};

class HttpClient {
 public:
  explicit HttpClient(std::string bearer_token);

  // GET into memory; a body past max_body_bytes fails the transfer.
  HttpResponse Get(const std::string& url, size_t max_body_bytes);

  // GET url and write its body to fd from byte `offset` on (asking with
  // "Range: bytes=offset-" when offset > 0). A 206 must start at offset; a
  // 200 to a Range request truncates the file and starts over (restarted).
  // An error status (>= 400) writes nothing to fd; its body lands in body.
  // on_progress(bytes_written) is called as data arrives.
  HttpResponse Download(const std::string& url, int fd, int64_t offset,
                        const std::function<void(int64_t)>& on_progress);

 private:
  std::string token_;
};

}  // namespace tern::hub
