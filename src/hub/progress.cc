#include "hub/progress.h"

#include <algorithm>

namespace tern::hub {
namespace {

constexpr int kBarWidth = 30;
constexpr auto kRedrawEvery = std::chrono::milliseconds(100);

}  // namespace

std::string HumanBytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024.0 && u < 4) {
    bytes /= 1024.0;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), u == 0 ? "%.0f %s" : "%.1f %s", bytes, units[u]);
  return buf;
}

DownloadProgress::DownloadProgress(std::string label, int64_t total_bytes, int64_t start_bytes,
                                   FILE* out, bool terminal)
    : label_(std::move(label)),
      total_bytes_(total_bytes),
      start_bytes_(start_bytes),
      out_(out),
      terminal_(terminal),
      last_bytes_(start_bytes),
      started_(std::chrono::steady_clock::now()) {
  if (total_bytes_ > 0) last_decile_ = (int)(10 * std::min(start_bytes_, total_bytes_) / total_bytes_);
  std::string line = "downloading " + label_;
  if (total_bytes_ >= 0) line += " (" + HumanBytes((double)total_bytes_) + ")";
  if (start_bytes_ > 0) line += ", resuming at " + HumanBytes((double)start_bytes_);
  std::fprintf(out_, "%s\n", line.c_str());
  std::fflush(out_);
}

void DownloadProgress::Update(int64_t done_bytes) {
  last_bytes_ = done_bytes;
  const auto now = std::chrono::steady_clock::now();
  if (terminal_) {
    if (drawn_ && now - last_draw_ < kRedrawEvery) return;
    last_draw_ = now;
    Draw(done_bytes);
    return;
  }
  if (total_bytes_ <= 0) return;
  const int decile = (int)(10 * std::min(done_bytes, total_bytes_) / total_bytes_);
  if (decile > last_decile_ && decile < 10) {
    Draw(done_bytes);
    last_decile_ = decile;
  }
}

void DownloadProgress::Draw(int64_t done_bytes) {
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  const double rate = seconds > 0 ? (double)(done_bytes - start_bytes_) / seconds : 0;
  std::string text = HumanBytes((double)done_bytes);
  int percent = -1;
  if (total_bytes_ > 0) {
    percent = (int)(100 * std::min(done_bytes, total_bytes_) / total_bytes_);
    text += " / " + HumanBytes((double)total_bytes_);
  }
  text += "  " + HumanBytes(rate) + "/s";
  if (terminal_) {
    std::string bar;
    if (percent >= 0) {
      const int fill = percent * kBarWidth / 100;
      bar = "[" + std::string(fill, '#') + std::string(kBarWidth - fill, '.') + "] ";
    }
    std::fprintf(out_, "\r%s%3d%%  %s\033[K", bar.c_str(), std::max(percent, 0), text.c_str());
    drawn_ = true;
  } else {
    std::fprintf(out_, "  %s: %d%%  %s\n", label_.c_str(), percent, text.c_str());
  }
  std::fflush(out_);
}

void DownloadProgress::Finish() {
  if (terminal_) {
    Draw(last_bytes_);
    std::fprintf(out_, "\n");
  } else {
    std::fprintf(out_, "  %s: done, %s\n", label_.c_str(), HumanBytes((double)last_bytes_).c_str());
  }
  std::fflush(out_);
}

}  // namespace tern::hub
