#include "hub/model_hub.h"

#include "base/progress.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "base/progress.h"
#include "hub/sha256.h"

namespace tern::hub {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr size_t kMaxListingBytes = 64 << 20;
constexpr int kMaxAttempts = 3;  // per download, resuming after each cut
constexpr auto kRetryDelay = std::chrono::milliseconds(500);  // x attempt number

bool Exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// Percent-encodes every byte outside [A-Za-z0-9-._~/].
std::string UrlPath(const std::string& path) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : path) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~' || c == '/') {
      out += (char)c;
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

std::string ResolveUrl(const HubConfig& c, const ModelSpec& spec, const std::string& file) {
  return c.endpoint + "/" + spec.org + "/" + spec.repo + "/resolve/main/" + UrlPath(file);
}

std::string ListingUrl(const HubConfig& c, const ModelSpec& spec) {
  return c.endpoint + "/api/models/" + spec.org + "/" + spec.repo + "?blobs=true";
}

std::vector<std::string> Names(const std::vector<RepoFile>& files) {
  std::vector<std::string> names;
  for (const RepoFile& f : files) names.push_back(f.name);
  return names;
}

std::string Lower(std::string s) {
  for (char& c : s) c = (char)std::tolower((unsigned char)c);
  return s;
}

int64_t FileSize(int fd) {
  struct stat st;
  return ::fstat(fd, &st) == 0 ? (int64_t)st.st_size : -1;
}

Status MakeDirs(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Unavailable("cannot create the cache folder " + dir + ": " + ec.message());
  return Status::Ok();
}

Status CheckDiskSpace(const std::string& dir, int64_t needed_bytes, const std::string& file) {
  struct statvfs vfs;
  if (needed_bytes <= 0 || ::statvfs(dir.c_str(), &vfs) != 0) return Status::Ok();
  const double free_bytes = (double)vfs.f_bavail * (double)vfs.f_frsize;
  if (free_bytes >= (double)needed_bytes) return Status::Ok();
  return ResourceExhausted("not enough disk space in " + dir + " for " + file + ": it needs " +
                           FormatBytes((double)needed_bytes) + " more, " +
                           FormatBytes(free_bytes) + " are free (TERN_CACHE moves the cache)");
}

// Holds an flock on an open file descriptor, closes it on destruction.
class LockedFile {
 public:
  explicit LockedFile(int fd) : fd_(fd) {}
  ~LockedFile() {
    if (fd_ >= 0) ::close(fd_);
  }
  LockedFile(const LockedFile&) = delete;
  LockedFile& operator=(const LockedFile&) = delete;
  int fd() const { return fd_; }

 private:
  int fd_;
};

}  // namespace

StatusOr<std::vector<RepoFile>> ParseRepoListing(const std::string& json_text,
                                                 const std::string& repo_id) {
  const json doc = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) {
    return DataLoss("the hub's listing of " + repo_id + " is not a JSON object");
  }
  auto siblings = doc.find("siblings");
  if (siblings == doc.end() || !siblings->is_array()) {
    return DataLoss("the hub's listing of " + repo_id + " has no 'siblings' array");
  }
  std::vector<RepoFile> files;
  for (const json& s : *siblings) {
    if (!s.is_object() || !s.contains("rfilename") || !s["rfilename"].is_string()) continue;
    RepoFile f;
    f.name = s["rfilename"].get<std::string>();
    if (!ValidateRepoPath(f.name).ok()) continue;  // never a cache path outside the repo
    if (s.contains("size") && s["size"].is_number_integer()) f.size = s["size"].get<int64_t>();
    if (auto lfs = s.find("lfs"); lfs != s.end() && lfs->is_object()) {
      if (lfs->contains("sha256") && (*lfs)["sha256"].is_string()) {
        const std::string sha = Lower((*lfs)["sha256"].get<std::string>());
        if (IsSha256Hex(sha)) f.sha256 = sha;
      }
      if (lfs->contains("size") && (*lfs)["size"].is_number_integer()) {
        f.size = (*lfs)["size"].get<int64_t>();
      }
    }
    files.push_back(std::move(f));
  }
  return files;
}

std::string ChecksumFromHeaders(const HttpResponse& response) {
  auto clean = [](std::string v) {
    if (v.rfind("W/", 0) == 0) v = v.substr(2);
    if (v.size() >= 2 && v.front() == '"' && v.back() == '"') v = v.substr(1, v.size() - 2);
    return Lower(v);
  };
  if (std::string linked = clean(response.AnyHopHeader("x-linked-etag")); IsSha256Hex(linked)) {
    return linked;
  }
  for (const HeaderMap& hop : response.hops) {
    if (auto it = hop.find("etag"); it != hop.end() && IsSha256Hex(clean(it->second))) {
      return clean(it->second);
    }
  }
  return "";
}

ModelHub::ModelHub(HubConfig config, FILE* log)
    : config_(std::move(config)), log_(log), http_(config_.token) {}

std::string ModelHub::CachedPath(const ModelSpec& spec, const std::string& file) const {
  return config_.cache_dir + "/models/" + spec.org + "/" + spec.repo + "/" + file;
}

std::string ModelHub::ListingPath(const ModelSpec& spec) const {
  return config_.cache_dir + "/listings/" + spec.org + "/" + spec.repo + ".json";
}

std::optional<std::vector<RepoFile>> ModelHub::ReadCachedListing(const ModelSpec& spec) const {
  std::ifstream in(ListingPath(spec), std::ios::binary);
  if (!in) return std::nullopt;
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  StatusOr<std::vector<RepoFile>> files = ParseRepoListing(text, spec.RepoId());
  if (!files.ok()) return std::nullopt;
  return std::move(files).value();
}

Status ModelHub::WriteCachedListing(const ModelSpec& spec,
                                    const std::vector<RepoFile>& files) const {
  json siblings = json::array();
  for (const RepoFile& f : files) {
    json s = {{"rfilename", f.name}, {"size", f.size}};
    if (!f.sha256.empty()) s["lfs"] = {{"sha256", f.sha256}, {"size", f.size}};
    siblings.push_back(std::move(s));
  }
  const std::string path = ListingPath(spec);
  TERN_RETURN_IF_ERROR(MakeDirs(fs::path(path).parent_path().string()));
  const std::string tmp = path + ".tmp" + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << json{{"id", spec.RepoId()}, {"siblings", siblings}}.dump(1) << "\n";
    if (!out) return Unavailable("cannot write " + tmp);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    return Unavailable("cannot write " + path + ": " + std::strerror(errno));
  }
  return Status::Ok();
}

std::optional<std::string> ModelHub::FindCached(const ModelSpec& spec) const {
  std::string file = spec.file;
  if (file.empty()) {
    std::optional<std::vector<RepoFile>> listing = ReadCachedListing(spec);
    if (!listing) return std::nullopt;
    StatusOr<std::string> chosen = SelectGgufFile(Names(*listing), spec.quant, spec.RepoId());
    if (!chosen.ok()) return std::nullopt;
    file = *chosen;
  }
  const std::string path = CachedPath(spec, file);
  if (!Exists(path)) return std::nullopt;
  return path;
}

Status ModelHub::TransportError(const HttpResponse& r, const std::string& url) const {
  return Unavailable("cannot reach " + config_.endpoint + " (" + r.curl_error + ", GET " + url +
                     "); check the network, or use a model already in the cache (" +
                     config_.cache_dir + ") with --offline or HF_HUB_OFFLINE=1");
}

Status ModelHub::HttpStatusError(const HttpResponse& r, const ModelSpec& spec,
                                 const std::string& file) const {
  const std::string repo = spec.RepoId();
  const std::string server_says = r.Header("x-error-message");
  const std::string note = server_says.empty() ? "" : " (the hub says: " + server_says + ")";
  const std::string token_hint =
      config_.token.empty() ? "set HF_TOKEN to a Hugging Face access token that may read it"
                            : "the token in HF_TOKEN was not accepted for it";
  switch (r.status) {
    case 401:
      return Unavailable(repo + ": unauthorized (HTTP 401): the repository is gated or private, "
                         "or does not exist; " + token_hint + note);
    case 403:
      return Unavailable(repo + ": forbidden (HTTP 403): a gated repository; accept its terms at " +
                         config_.endpoint + "/" + repo + " and " +
                         (config_.token.empty() ? std::string("set HF_TOKEN to a token of that account")
                                                : std::string("check that HF_TOKEN belongs to that account")) +
                         note);
    case 404:
      if (file.empty()) {
        return NotFound("repository " + repo + " not found at " + config_.endpoint + " (HTTP 404)" +
                        note);
      }
      return NotFound("file '" + file + "' not found in " + repo + " (HTTP 404)" + note);
    case 429:
      return Unavailable(config_.endpoint + " is rate-limiting requests (HTTP 429); wait and try "
                         "again" + std::string(config_.token.empty() ? ", or set HF_TOKEN" : "") + note);
    default:
      return Unavailable(repo + ": HTTP " + std::to_string(r.status) + " from " + config_.endpoint +
                         (file.empty() ? "" : " for '" + file + "'") + note);
  }
}

StatusOr<std::vector<RepoFile>> ModelHub::FetchListing(const ModelSpec& spec) {
  const std::string url = ListingUrl(config_, spec);
  HttpResponse r = http_.Get(url, kMaxListingBytes);
  if (r.status >= 400) return HttpStatusError(r, spec, "");
  if (!r.transport_ok()) return TransportError(r, url);
  if (r.status != 200) return HttpStatusError(r, spec, "");
  TERN_ASSIGN_OR_RETURN(std::vector<RepoFile> files, ParseRepoListing(r.body, spec.RepoId()));
  if (Status st = WriteCachedListing(spec, files); !st.ok()) {
    std::fprintf(log_, "note: %s (offline use of ':QUANT' names needs it)\n", st.message().c_str());
  }
  return files;
}

StatusOr<RepoFile> ModelHub::ChooseFile(const ModelSpec& spec,
                                        const std::vector<RepoFile>& files) const {
  std::string name = spec.file;
  if (name.empty()) {
    TERN_ASSIGN_OR_RETURN(name, SelectGgufFile(Names(files), spec.quant, spec.RepoId()));
  }
  for (const RepoFile& f : files) {
    if (f.name == name) return f;
  }
  std::vector<std::string> ggufs;
  for (const RepoFile& f : files) {
    if (IsGgufName(f.name)) ggufs.push_back(f.name);
  }
  std::string list;
  for (const std::string& g : ggufs) list += (list.empty() ? "" : ", ") + g;
  return NotFound("file '" + name + "' not found in " + spec.RepoId() + "; its .gguf files: " +
                  (list.empty() ? "(none)" : list));
}

Status ModelHub::OfflineMiss(const ModelSpec& spec) const {
  std::string what = spec.ToString();
  if (std::optional<std::vector<RepoFile>> listing;
      spec.file.empty() && (listing = ReadCachedListing(spec))) {
    StatusOr<std::string> chosen = SelectGgufFile(Names(*listing), spec.quant, spec.RepoId());
    if (!chosen.ok()) return chosen.status().WithContext("cached listing");
    what += " (" + *chosen + ")";
  }
  return NotFound(what + " is not in the cache (" + config_.cache_dir +
                  ") and offline mode is on (--offline or HF_HUB_OFFLINE); pull it once with "
                  "the network");
}

StatusOr<std::string> ModelHub::Fetch(const ModelSpec& spec) {
  if (config_.cache_dir.empty()) {
    return InvalidArgument("no cache folder: set TERN_CACHE (HOME and XDG_CACHE_HOME are unset)");
  }
  if (std::optional<std::string> cached = FindCached(spec)) return *cached;
  if (config_.offline) return OfflineMiss(spec);
  TERN_ASSIGN_OR_RETURN(std::vector<RepoFile> files, FetchListing(spec));
  TERN_ASSIGN_OR_RETURN(RepoFile file, ChooseFile(spec, files));
  const std::string dest = CachedPath(spec, file.name);
  if (!Exists(dest)) TERN_RETURN_IF_ERROR(Download(spec, file, dest));
  return dest;
}

Status ModelHub::Download(const ModelSpec& spec, const RepoFile& file, const std::string& dest) {
  TERN_RETURN_IF_ERROR(MakeDirs(fs::path(dest).parent_path().string()));
  const std::string part = dest + ".part";
  LockedFile locked(::open(part.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
  if (locked.fd() < 0) return Unavailable("cannot open " + part + ": " + std::strerror(errno));
  if (::flock(locked.fd(), LOCK_EX | LOCK_NB) != 0) {
    std::fprintf(log_, "waiting for another tern that is downloading %s\n", part.c_str());
    if (::flock(locked.fd(), LOCK_EX) != 0) {
      return Unavailable("cannot lock " + part + ": " + std::strerror(errno));
    }
  }
  if (Exists(dest)) return Status::Ok();  // the other process finished it
  // The other process may have removed our .part (a checksum mismatch):
  // write to the name, not to an unlinked inode.
  struct stat by_fd, by_name;
  if (::fstat(locked.fd(), &by_fd) != 0 || ::stat(part.c_str(), &by_name) != 0 ||
      by_fd.st_ino != by_name.st_ino) {
    return Unavailable("another tern removed " + part + " while this one waited; run again");
  }
  Status st = DownloadLocked(spec, file, dest, locked.fd());
  if (!st.ok() && FileSize(locked.fd()) == 0) ::unlink(part.c_str());  // nothing to resume
  return st;
}

Status ModelHub::DownloadLocked(const ModelSpec& spec, const RepoFile& file,
                                const std::string& dest, int fd) {
  const std::string part = dest + ".part";
  const std::string url = ResolveUrl(config_, spec, file.name);
  const std::string label = spec.RepoId() + "/" + file.name;
  int64_t have = FileSize(fd);
  if (file.size >= 0 && have > file.size) have = 0;  // not this file's prefix
  if (have == 0 && ::ftruncate(fd, 0) != 0) return Unavailable("cannot truncate " + part);
  TERN_RETURN_IF_ERROR(CheckDiskSpace(fs::path(dest).parent_path().string(),
                                      file.size >= 0 ? file.size - have : 0, label));
  const bool terminal = ::isatty(::fileno(log_)) == 1;
  std::string header = "downloading " + label;
  if (file.size >= 0) header += " (" + FormatBytes((double)file.size) + ")";
  if (have > 0) header += ", resuming at " + FormatBytes((double)have);
  std::fprintf(log_, "%s\n", header.c_str());
  Progress::Options progress_options;
  progress_options.out = log_;
  progress_options.terminal = terminal;
  Progress progress(label, "bytes", file.size, progress_options);
  const auto started = std::chrono::steady_clock::now();
  const int64_t first_byte = have;
  auto detail = [&](int64_t done) {
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    return FormatBytes((double)done) + ", " + FormatBytes(s > 0 ? (done - first_byte) / s : 0) + "/s";
  };
  std::string header_sha256;
  for (int attempt = 1;; ++attempt) {
    have = FileSize(fd);
    if (file.size >= 0 && have == file.size) break;  // complete (a resumed cut at the end)
    if (::lseek(fd, have, SEEK_SET) != have) return Unavailable("cannot seek in " + part);
    const int64_t start = have;
    HttpResponse r = http_.Download(url, fd, start, [&](int64_t written) {
      progress.Update(start + written, detail(start + written));
    });
    if (std::string sha = ChecksumFromHeaders(r); !sha.empty()) header_sha256 = sha;
    if (r.status == 416 && have > 0 && attempt < kMaxAttempts) {  // a stale .part: start over
      if (::ftruncate(fd, 0) != 0) return Unavailable("cannot truncate " + part);
      continue;
    }
    if (r.status >= 400) return HttpStatusError(r, spec, file.name);
    if (r.transport_ok() && (r.status == 200 || r.status == 206)) break;
    if (r.aborted_locally) return Unavailable(label + ": " + r.curl_error);
    if (r.transport_ok()) return HttpStatusError(r, spec, file.name);  // 204, 304, ...
    if (!r.connected() && attempt == 1) return TransportError(r, url);
    if (attempt >= kMaxAttempts) {
      return Unavailable("download of " + label + " interrupted at " +
                         FormatBytes((double)FileSize(fd)) + " (" + r.curl_error + ") after " +
                         std::to_string(attempt) + " attempts; " + part +
                         " is kept: run the command again to resume");
    }
    std::fprintf(log_, "%sinterrupted at %s (%s); resuming (attempt %d of %d)\n",
                 terminal ? "\n" : "",
                 FormatBytes((double)FileSize(fd)).c_str(), r.curl_error.c_str(), attempt + 1,
                 kMaxAttempts);
    std::this_thread::sleep_for(kRetryDelay * attempt);
  }
  progress.Finish(detail(FileSize(fd)));
  if (file.size >= 0 && FileSize(fd) != file.size) {
    ::unlink(part.c_str());
    return DataLoss(label + ": got " + std::to_string(FileSize(fd)) + " bytes, the hub lists " +
                    std::to_string(file.size) + "; the download was deleted, run again");
  }
  TERN_RETURN_IF_ERROR(Verify(spec, file, part, header_sha256));
  if (::fsync(fd) != 0 || ::rename(part.c_str(), dest.c_str()) != 0) {
    return Unavailable("cannot move " + part + " to " + dest + ": " + std::strerror(errno));
  }
  return Status::Ok();
}

Status ModelHub::Verify(const ModelSpec& spec, const RepoFile& file, const std::string& part,
                        const std::string& header_sha256) {
  const std::string label = spec.RepoId() + "/" + file.name;
  const std::string expected = !file.sha256.empty() ? file.sha256 : header_sha256;
  if (expected.empty()) {
    std::fprintf(log_, "note: the hub publishes no SHA-256 for %s; not verified\n", label.c_str());
    return Status::Ok();
  }
  StatusOr<std::string> actual = Sha256File(part);
  if (!actual.ok()) return actual.status();
  if (*actual == expected) return Status::Ok();
  ::unlink(part.c_str());
  return DataLoss("checksum mismatch for " + label + ": expected sha256 " + expected + ", got " +
                  *actual + "; the download was deleted, run the command again");
}

StatusOr<std::string> FetchModel(const std::string& spec_text, HubConfig config) {
  TERN_ASSIGN_OR_RETURN(ModelSpec spec, ParseModelSpec(spec_text));
  ModelHub hub(std::move(config));
  return hub.Fetch(spec);
}

}  // namespace tern::hub
