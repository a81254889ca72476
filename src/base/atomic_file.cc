#include "base/atomic_file.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <utility>

namespace tern {

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)), tmp_(path_ + ".tmp-XXXXXX") {}

AtomicFile::~AtomicFile() { Abort(); }

Status AtomicFile::Create() {
  if (created_ || done_) return Unavailable(path_ + ": AtomicFile::Create called twice");
  fd_ = ::mkstemp(tmp_.data());
  if (fd_ < 0) {
    done_ = true;  // nothing to remove
    return Unavailable(path_ + ": cannot create temporary file " + tmp_ + ": " +
                       std::strerror(errno));
  }
  created_ = true;
  ::fchmod(fd_, 0644);
  return Status::Ok();
}

Status AtomicFile::Fail(const std::string& what, int err) {
  failed_ = true;
  Abort();
  return Unavailable(path_ + ": " + what + ": " + std::strerror(err));
}

Status AtomicFile::Write(const void* data, size_t n) {
  if (!created_ || done_ || failed_) return Unavailable(path_ + ": write after a failure");
  const auto* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd_, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return Fail("write failed", errno);
    if (w == 0) return Fail("write failed", ENOSPC);
    p += w;
    n -= static_cast<size_t>(w);
  }
  return Status::Ok();
}

Status AtomicFile::Commit() {
  if (!created_ || done_ || failed_) return Unavailable(path_ + ": commit after a failure");
  if (::fsync(fd_) != 0) return Fail("fsync failed", errno);
  // Drop the written (now clean) pages from the page cache: pages cached by
  // write() stay in small folios, while the first mmap read of the file
  // brings it back in 2 MiB folios that the model loader then maps with huge
  // page entries (decode reads F16 weights ~20% faster that way).
  ::posix_fadvise(fd_, 0, 0, POSIX_FADV_DONTNEED);
  const int fd = std::exchange(fd_, -1);
  if (::close(fd) != 0) return Fail("close failed", errno);
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) return Fail("rename failed", errno);
  done_ = true;
  return Status::Ok();
}

void AtomicFile::Abort() {
  if (fd_ >= 0) ::close(std::exchange(fd_, -1));
  if (created_ && !done_) ::unlink(tmp_.c_str());
  done_ = true;
}

Status WriteFileAtomically(const std::string& path, std::string_view contents) {
  AtomicFile f(path);
  TERN_RETURN_IF_ERROR(f.Create());
  TERN_RETURN_IF_ERROR(f.Write(contents));
  return f.Commit();
}

void IgnoreFileSizeSignal() { ::signal(SIGXFSZ, SIG_IGN); }

}  // namespace tern
