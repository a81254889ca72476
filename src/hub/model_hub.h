// ModelHub: a GGUF file named by a ModelSpec, as a local path: the cached
// copy when there is one, else downloaded from the hub into the cache.
//
// Cache layout (under HubConfig::cache_dir):
//
//   models/ORG/REPO/FILE        complete files whose SHA-256 was checked
//   models/ORG/REPO/FILE.part   a download under way or cut; the next
//                               Fetch resumes it with a Range request
//   listings/ORG/REPO.json      the repo's files (name, size, sha256) as
//                               the hub listed them on the last online Fetch
//
// A spec that resolves to a complete cached file is served without any
// network request: ORG/REPO/FILE directly, ORG/REPO[:QUANT] through the
// cached listing (so offline, a QUANT spec resolves the way it did online).
// A file only appears under its final name after its checksum matched; on a
// mismatch both the .part and the final name are gone. Two processes
// fetching the same file take turns (an flock on the .part), the second then
// finds the finished file.
//
// Endpoints (HubConfig::endpoint = E):
//   E/api/models/ORG/REPO?blobs=true       the listing (siblings[].rfilename,
//                                          .size, .lfs.sha256)
//   E/ORG/REPO/resolve/main/FILE           the file (redirects followed;
//                                          X-Linked-Etag / ETag carry the
//                                          sha256 of LFS files)
// Progress and notes go to `log` (stderr); not thread-safe.
#pragma once

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "hub/hub_config.h"
#include "hub/http_client.h"
#include "hub/model_spec.h"

namespace tern::hub {

struct RepoFile {
  std::string name;    // path inside the repo
  int64_t size = -1;   // -1: not listed
  std::string sha256;  // lower-case hex; empty: not listed (not an LFS file)
};

// The files of an /api/models answer (siblings[]); errors name the repo.
StatusOr<std::vector<RepoFile>> ParseRepoListing(const std::string& json_text,
                                                 const std::string& repo_id);

// The sha256 a resolve response vouches for: X-Linked-Etag on any hop, else
// an ETag that is 64 hex digits (quotes and W/ stripped); "" if neither.
std::string ChecksumFromHeaders(const HttpResponse& response);

class ModelHub {
 public:
  explicit ModelHub(HubConfig config, FILE* log = stderr);

  StatusOr<std::string> Fetch(const ModelSpec& spec);

  // Where a repo file lives in the cache (complete or not).
  std::string CachedPath(const ModelSpec& spec, const std::string& file) const;

 private:
  std::string ListingPath(const ModelSpec& spec) const;
  std::optional<std::vector<RepoFile>> ReadCachedListing(const ModelSpec& spec) const;
  Status WriteCachedListing(const ModelSpec& spec, const std::vector<RepoFile>& files) const;
  std::optional<std::string> FindCached(const ModelSpec& spec) const;
  Status OfflineMiss(const ModelSpec& spec) const;
  StatusOr<std::vector<RepoFile>> FetchListing(const ModelSpec& spec);
  StatusOr<RepoFile> ChooseFile(const ModelSpec& spec, const std::vector<RepoFile>& files) const;
  Status Download(const ModelSpec& spec, const RepoFile& file, const std::string& dest);
  Status DownloadLocked(const ModelSpec& spec, const RepoFile& file, const std::string& dest,
                        int fd);
  Status Verify(const ModelSpec& spec, const RepoFile& file, const std::string& part,
                const std::string& header_sha256);
  Status HttpStatusError(const HttpResponse& r, const ModelSpec& spec,
                         const std::string& file) const;
  Status TransportError(const HttpResponse& r, const std::string& url) const;

  HubConfig config_;
  FILE* log_;
  HttpClient http_;
};

// One call for the front ends: parses spec_text, fetches it with config,
// returns the local path.
StatusOr<std::string> FetchModel(const std::string& spec_text, HubConfig config);

}  // namespace tern::hub
