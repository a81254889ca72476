// Progress: the one progress display of the tools (perplexity, imatrix,
// eval-quant, batch, model synth), written to stderr so stdout stays the
// command's result.
//
// On a terminal it redraws one bar in place with '\r'. Anywhere else (a CI
// log, a file, a pipe) a '\r' would fold the whole run into one log line, so
// it writes plain lines instead: one when another 10% of the work is done or
// 5 s have passed since the last line, whichever comes first, and always a
// final line from Finish.
//
//   terminal:  \rperplexity [#########.....................] 14/42 chunks, ppl 6.8464
//   log:       perplexity: 14/42 chunks (33%), ppl 6.8464, 12.0 s
//
// Thread rules: one thread at a time.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>

namespace tern {

class Progress {
 public:
  struct Options {
    FILE* out = stderr;
    // Terminal (bar) or log (lines) mode; unset: isatty(fileno(out)).
    std::optional<bool> terminal;
    // Log mode: a line at least every percent_step % of total, and at least
    // every min_interval_s seconds while Update is called.
    int percent_step = 10;
    double min_interval_s = 5.0;
    // Terminal mode: redraws at most every redraw_interval_s (Finish always).
    double redraw_interval_s = 0.1;
    // Monotonic seconds; unset: std::chrono::steady_clock (tests inject one).
    std::function<double()> now_s;
  };

  // label: the tool ("perplexity"); unit: what total counts ("chunks").
  Progress(std::string label, std::string unit, int64_t total);
  Progress(std::string label, std::string unit, int64_t total, Options options);

  // done of total finished; detail: a short status ("ppl 6.8464"), may be empty.
  // In log mode a done >= total is left to Finish, so it is written once.
  void Update(int64_t done, const std::string& detail = "");
  // Writes the final state (done as last updated) and ends the line. Once.
  void Finish(const std::string& detail = "");

  bool terminal() const { return terminal_; }

 private:
  double Now() const;
  std::string Counts(int64_t done) const;  // "14/42 chunks"
  void DrawBar(int64_t done, const std::string& detail);
  void WriteLine(int64_t done, const std::string& detail);

  std::string label_, unit_;
  int64_t total_ = 0;
  Options options_;
  bool terminal_ = false;
  double start_s_ = 0;
  double last_output_s_ = -1e300;  // last bar drawn or line written
  int64_t last_bucket_ = 0;        // log mode: percent_step buckets written
  int64_t done_ = 0;
  size_t last_bar_width_ = 0;
  bool finished_ = false;
};

// Formats bytes as "512 B", "512.0 MiB", "8.0 GiB" (progress lines, messages).
std::string FormatBytes(double bytes);

}  // namespace tern
