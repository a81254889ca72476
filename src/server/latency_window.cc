#include "server/latency_window.h"

#include <vector>

namespace tern {

void LatencyWindow::Add(Series& s, Clock::time_point t, double v) {
  s.emplace_back(t, v);
  const auto oldest = t - std::chrono::duration_cast<Clock::duration>(
                              std::chrono::duration<double>(kMaxAgeS));
  while (!s.empty() && (s.size() > kMaxSamples || s.front().first < oldest)) s.pop_front();
}

void LatencyWindow::Observe(const RequestMetrics& m, Clock::time_point now) {
  std::lock_guard<std::mutex> lock(mu_);
  if (m.generated_tokens > 0) Add(ttft_, now, m.ttft_s);
  if (m.generated_tokens > 1) Add(tpot_, now, m.tpot_s);
  for (double gap : m.itl_s) Add(itl_, now, gap);
  Add(e2e_, now, m.e2e_s);
  Add(queue_, now, m.queue_s);
}

PercentileSummary LatencyWindow::Summarize(const Series& s, Clock::time_point since) {
  std::vector<double> values;
  for (const auto& [t, v] : s) {
    if (t >= since) values.push_back(v);
  }
  return tern::Summarize(std::move(values));
}

LatencySummaries LatencyWindow::Summaries(double window_s, Clock::time_point now) const {
  const Clock::time_point since =
      now - std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(window_s));
  std::lock_guard<std::mutex> lock(mu_);
  LatencySummaries out;
  out.ttft = Summarize(ttft_, since);
  out.tpot = Summarize(tpot_, since);
  out.itl = Summarize(itl_, since);
  out.e2e = Summarize(e2e_, since);
  out.queue = Summarize(queue_, since);
  return out;
}

}  // namespace tern
