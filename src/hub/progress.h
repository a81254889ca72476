// DownloadProgress: how far a download is, on stderr. On a terminal one
// line redrawn in place (a bar, bytes, speed) at most every 100 ms; otherwise
// (a log, a pipe) one plain line per 10% so that logs stay short.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace tern::hub {

class DownloadProgress {
 public:
  // total_bytes < 0: unknown. start_bytes: already on disk (a resume).
  DownloadProgress(std::string label, int64_t total_bytes, int64_t start_bytes, FILE* out,
                   bool terminal);
  void Update(int64_t done_bytes);  // bytes on disk so far, start_bytes included
  void Finish();                    // ends the line (terminal) or prints "done"

 private:
  void Draw(int64_t done_bytes);

  std::string label_;
  int64_t total_bytes_;
  int64_t start_bytes_;
  FILE* out_;
  bool terminal_;
  int64_t last_bytes_ = 0;
  int last_decile_ = 0;  // plain lines: the last 10% step printed
  std::chrono::steady_clock::time_point started_, last_draw_;
  bool drawn_ = false;
};

// "1.2 MiB", "512 B".
std::string HumanBytes(double bytes);

}  // namespace tern::hub
