// AtomicFile: writes a file so that readers only ever see the old file or the
// complete new one. Bytes go to "<path>.tmp-XXXXXX" in the destination folder
// (same file system, so the final rename is atomic); Commit() fsyncs, closes
// and renames it over path. Any failure (disk full, RLIMIT_FSIZE, a write
// error), Abort() or destruction before Commit() unlinks the temp file and
// leaves an existing path untouched. A process killed outright (SIGKILL)
// leaves only the temp file, never a partial path.
//
// Processes that write outputs should ignore SIGXFSZ (IgnoreFileSizeSignal),
// so that exceeding RLIMIT_FSIZE fails the write with EFBIG instead of
// killing the process before it can clean up.
//
// Errors: Unavailable naming path and the failing step with errno's text.
// Thread rules: one AtomicFile per thread; distinct files on any threads.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "base/status.h"

namespace tern {

class AtomicFile {
 public:
  explicit AtomicFile(std::string path);
  ~AtomicFile();  // Abort() unless committed
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  // Creates the temp file (mode 0644).
  Status Create();
  // Appends n bytes; after a failure every later call fails too.
  Status Write(const void* data, size_t n);
  Status Write(std::string_view text) { return Write(text.data(), text.size()); }
  // fsync, close, rename over path. On failure the temp file is removed.
  Status Commit();
  // Removes the temp file; path is untouched. Idempotent.
  void Abort();

  const std::string& path() const { return path_; }
  const std::string& temp_path() const { return tmp_; }

 private:
  Status Fail(const std::string& what, int err);

  std::string path_;
  std::string tmp_;
  int fd_ = -1;
  bool created_ = false;
  bool done_ = false;  // committed or aborted
  bool failed_ = false;
};

// Writes contents to path through an AtomicFile.
Status WriteFileAtomically(const std::string& path, std::string_view contents);

// SIGXFSZ -> SIG_IGN: a write past RLIMIT_FSIZE then fails with EFBIG.
void IgnoreFileSizeSignal();

}  // namespace tern
