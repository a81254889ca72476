#include "base/progress.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <utility>

namespace tern {
namespace {

constexpr int kBarWidth = 30;

double SteadySeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

Progress::Progress(std::string label, std::string unit, int64_t total)
    : Progress(std::move(label), std::move(unit), total, Options()) {}

Progress::Progress(std::string label, std::string unit, int64_t total, Options options)
    : label_(std::move(label)), unit_(std::move(unit)), total_(total), options_(std::move(options)) {
  if (!options_.out) options_.out = stderr;
  terminal_ = options_.terminal.has_value() ? *options_.terminal : ::isatty(::fileno(options_.out)) == 1;
  options_.percent_step = std::clamp(options_.percent_step, 1, 100);
  start_s_ = Now();
  last_output_s_ = terminal_ ? -1e300 : start_s_;
}

double Progress::Now() const { return options_.now_s ? options_.now_s() : SteadySeconds(); }

std::string Progress::Counts(int64_t done) const {
  std::string s = std::to_string(done);
  if (total_ > 0) s += "/" + std::to_string(total_);
  if (!unit_.empty()) s += " " + unit_;
  return s;
}

void Progress::Update(int64_t done, const std::string& detail) {
  if (finished_) return;
  done_ = done;
  const double now = Now();
  if (terminal_) {
    if (now - last_output_s_ < options_.redraw_interval_s) return;
    DrawBar(done, detail);
    last_output_s_ = now;
    return;
  }
  if (total_ > 0 && done >= total_) return;  // Finish writes the last line
  const int64_t bucket = total_ > 0 ? done * 100 / (total_ * options_.percent_step) : 0;
  if (bucket <= last_bucket_ && now - last_output_s_ < options_.min_interval_s) return;
  WriteLine(done, detail);
  last_bucket_ = std::max(last_bucket_, bucket);
  last_output_s_ = now;
}

void Progress::Finish(const std::string& detail) {
  if (finished_) return;
  finished_ = true;
  if (terminal_) {
    DrawBar(done_, detail);
    std::fputc('\n', options_.out);
    std::fflush(options_.out);
  } else {
    WriteLine(done_, detail);
  }
}

void Progress::DrawBar(int64_t done, const std::string& detail) {
  const int64_t clamped = total_ > 0 ? std::clamp<int64_t>(done, 0, total_) : 0;
  const int filled = total_ > 0 ? (int)(clamped * kBarWidth / total_) : 0;
  std::string line = label_ + " [" + std::string(filled, '#') + std::string(kBarWidth - filled, '.') +
                     "] " + Counts(done);
  if (!detail.empty()) line += ", " + detail;
  const size_t width = line.size();
  // Blank out what a longer previous bar left behind.
  if (width < last_bar_width_) line += std::string(last_bar_width_ - width, ' ');
  last_bar_width_ = width;
  std::fprintf(options_.out, "\r%s", line.c_str());
  std::fflush(options_.out);
}

void Progress::WriteLine(int64_t done, const std::string& detail) {
  std::string line = label_ + ": " + Counts(done);
  if (total_ > 0) line += " (" + std::to_string(done * 100 / total_) + "%)";
  if (!detail.empty()) line += ", " + detail;
  char elapsed[32];
  std::snprintf(elapsed, sizeof elapsed, ", %.1f s", Now() - start_s_);
  std::fprintf(options_.out, "%s%s\n", line.c_str(), elapsed);
  std::fflush(options_.out);
}

std::string FormatBytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024.0 && u < 4) {
    bytes /= 1024.0;
    ++u;
  }
  char buf[64];
  if (u == 0) std::snprintf(buf, sizeof(buf), "%.0f B", bytes);
  else std::snprintf(buf, sizeof(buf), "%.1f %s", bytes, units[u]);
  return buf;
}

}  // namespace tern
