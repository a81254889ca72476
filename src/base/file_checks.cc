#include "base/file_checks.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

namespace tern {
namespace {

std::string FolderOf(const std::string& path) {
  const std::string parent = std::filesystem::path(path).parent_path().string();
  return parent.empty() ? "." : parent;
}

}  // namespace

Status CheckReadableFile(const std::string& path, const std::string& what) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    return NotFound(what + " " + path + ": " + std::strerror(errno));
  }
  if (S_ISDIR(st.st_mode)) return InvalidArgument(what + " " + path + " is a folder, not a file");
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return NotFound(what + " " + path + ": cannot open for reading: " + std::strerror(errno));
  std::fclose(f);
  return Status::Ok();
}

Status CheckWritableFile(const std::string& path, const std::string& what) {
  struct stat st;
  const bool exists = ::stat(path.c_str(), &st) == 0;
  if (exists && S_ISDIR(st.st_mode)) {
    return InvalidArgument(what + " " + path + " is a folder; give a file name");
  }
  const std::string folder = FolderOf(path);
  struct stat folder_st;
  if (::stat(folder.c_str(), &folder_st) != 0) {
    return NotFound(what + " " + path + ": folder " + folder + " does not exist");
  }
  if (!S_ISDIR(folder_st.st_mode)) {
    return InvalidArgument(what + " " + path + ": " + folder + " is not a folder");
  }
  std::string probe = path + ".tmp-XXXXXX";
  const int fd = ::mkstemp(probe.data());
  if (fd < 0) {
    return Unavailable(what + " " + path + ": cannot create a file in folder " + folder + ": " +
                       std::strerror(errno));
  }
  ::close(fd);
  ::unlink(probe.c_str());
  if (exists && ::access(path.c_str(), W_OK) != 0) {
    return Unavailable(what + " " + path + " exists and is not writable: " + std::strerror(errno));
  }
  return Status::Ok();
}

bool SameFile(const std::string& a, const std::string& b) {
  std::error_code ec;
  const bool same = std::filesystem::equivalent(a, b, ec);
  return !ec && same;
}

}  // namespace tern
