#include "tools/bench_serve_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

#include "metrics/percentile.h"
#include "tools/report_text.h"

namespace tern {

double RequestTpot(const ServeRequestResult& r) {
  if (r.output_tokens < 2) return 0;
  return (r.e2el_s - r.ttft_s) / (double)(r.output_tokens - 1);
}

LatencyStats SummarizeLatencies(const std::vector<double>& seconds) {
  LatencyStats st;
  if (seconds.empty()) return st;
  std::vector<double> ms(seconds.size());
  std::transform(seconds.begin(), seconds.end(), ms.begin(), [](double s) { return s * 1e3; });
  const PercentileSummary p = Summarize(ms);
  st.mean = p.mean;
  st.median = p.p50;
  st.p90 = p.p90;
  st.p99 = p.p99;
  st.max = p.max;
  st.count = p.count;
  double var = 0;
  for (double v : ms) var += (v - p.mean) * (v - p.mean);
  st.std = std::sqrt(var / (double)ms.size());
  return st;
}

ServeBenchSummary SummarizeServeBench(const std::vector<ServeRequestResult>& results,
                                      double duration_s, const GoodputSlo& slo) {
  ServeBenchSummary s;
  s.duration_s = duration_s;
  std::vector<double> ttft, tpot, itl, e2el;
  for (const ServeRequestResult& r : results) {
    if (!r.success) {
      ++s.failed;
      continue;
    }
    ++s.completed;
    s.total_input_tokens += r.prompt_tokens;
    s.total_output_tokens += r.output_tokens;
    ttft.push_back(r.ttft_s);
    e2el.push_back(r.e2el_s);
    if (r.output_tokens >= 2) tpot.push_back(RequestTpot(r));
    itl.insert(itl.end(), r.itl_s.begin(), r.itl_s.end());
    const bool good = (slo.ttft_ms <= 0 || r.ttft_s * 1e3 <= slo.ttft_ms) &&
                      (slo.tpot_ms <= 0 || RequestTpot(r) * 1e3 <= slo.tpot_ms) &&
                      (slo.e2el_ms <= 0 || r.e2el_s * 1e3 <= slo.e2el_ms);
    s.good_requests += good;
  }
  if (duration_s > 0) {
    s.request_throughput = s.completed / duration_s;
    s.output_throughput = (double)s.total_output_tokens / duration_s;
    s.total_token_throughput =
        (double)(s.total_input_tokens + s.total_output_tokens) / duration_s;
    s.request_goodput = s.good_requests / duration_s;
  }
  s.ttft = SummarizeLatencies(ttft);
  s.tpot = SummarizeLatencies(tpot);
  s.itl = SummarizeLatencies(itl);
  s.e2el = SummarizeLatencies(e2el);
  return s;
}

namespace {

void Line(std::string& out, const char* label, double value, const char* fmt = "%.2f") {
  char v[64];
  std::snprintf(v, sizeof(v), fmt, value);
  char buf[128];
  std::snprintf(buf, sizeof(buf), "%-40s %10s\n", label, v);
  out += buf;
}

void Section(std::string& out, const std::string& title) {
  const int width = 50;
  const int pad = std::max(0, width - (int)title.size());
  out += std::string(pad / 2, '-') + title + std::string(pad - pad / 2, '-') + "\n";
}

void LatencyLines(std::string& out, const char* name, const LatencyStats& st) {
  const std::string n = name;
  Line(out, ("Mean " + n + " (ms):").c_str(), st.mean);
  Line(out, ("Median " + n + " (ms):").c_str(), st.median);
  Line(out, ("P90 " + n + " (ms):").c_str(), st.p90);
  Line(out, ("P99 " + n + " (ms):").c_str(), st.p99);
  Line(out, ("Max " + n + " (ms):").c_str(), st.max);
}

std::string SloText(const GoodputSlo& slo) {
  std::string t;
  char buf[64];
  if (slo.ttft_ms > 0) t += (std::snprintf(buf, sizeof(buf), " ttft<=%gms", slo.ttft_ms), buf);
  if (slo.tpot_ms > 0) t += (std::snprintf(buf, sizeof(buf), " tpot<=%gms", slo.tpot_ms), buf);
  if (slo.e2el_ms > 0) t += (std::snprintf(buf, sizeof(buf), " e2el<=%gms", slo.e2el_ms), buf);
  return t;
}

}  // namespace

std::string FormatServeSummary(const ServeBenchSummary& s, const GoodputSlo& slo) {
  std::string out;
  out += std::string(12, '=') + " Serving Benchmark Result " + std::string(12, '=') + "\n";
  Line(out, "Successful requests:", s.completed, "%.0f");
  Line(out, "Failed requests:", s.failed, "%.0f");
  Line(out, "Benchmark duration (s):", s.duration_s);
  Line(out, "Total input tokens:", (double)s.total_input_tokens, "%.0f");
  Line(out, "Total generated tokens:", (double)s.total_output_tokens, "%.0f");
  Line(out, "Request throughput (req/s):", s.request_throughput);
  if (slo.any()) {
    Line(out, "Request goodput (req/s):", s.request_goodput);
    out += "  (goodput bounds:" + SloText(slo) + "; " + std::to_string(s.good_requests) +
           " requests met them)\n";
  }
  Line(out, "Output token throughput (tok/s):", s.output_throughput);
  Line(out, "Total token throughput (tok/s):", s.total_token_throughput);
  Section(out, "Time to First Token");
  LatencyLines(out, "TTFT", s.ttft);
  Section(out, "Time per Output Token (excl. 1st token)");
  LatencyLines(out, "TPOT", s.tpot);
  Section(out, "Inter-token Latency");
  LatencyLines(out, "ITL", s.itl);
  Section(out, "End-to-end Latency");
  LatencyLines(out, "E2EL", s.e2el);
  out += std::string(50, '=') + "\n";
  return out;
}

nlohmann::json ServeSummaryJson(const ServeBenchSummary& s,
                                const std::vector<ServeRequestResult>& results) {
  nlohmann::json j;
  j["duration"] = s.duration_s;
  j["completed"] = s.completed;
  j["failed"] = s.failed;
  j["total_input_tokens"] = s.total_input_tokens;
  j["total_output_tokens"] = s.total_output_tokens;
  j["request_throughput"] = s.request_throughput;
  j["request_goodput"] = s.request_goodput;
  j["good_requests"] = s.good_requests;
  j["output_throughput"] = s.output_throughput;
  j["total_token_throughput"] = s.total_token_throughput;
  const std::pair<const char*, const LatencyStats*> metrics[] = {
      {"ttft", &s.ttft}, {"tpot", &s.tpot}, {"itl", &s.itl}, {"e2el", &s.e2el}};
  for (const auto& [name, st] : metrics) {
    const std::string n = name;
    j["mean_" + n + "_ms"] = st->mean;
    j["std_" + n + "_ms"] = st->std;
    j["median_" + n + "_ms"] = st->median;
    j["p90_" + n + "_ms"] = st->p90;
    j["p99_" + n + "_ms"] = st->p99;
    j["max_" + n + "_ms"] = st->max;
  }
  nlohmann::json input_lens = nlohmann::json::array(), output_lens = nlohmann::json::array(),
                 starts = nlohmann::json::array(), ttfts = nlohmann::json::array(),
                 e2els = nlohmann::json::array(), itls = nlohmann::json::array(),
                 errors = nlohmann::json::array();
  for (const ServeRequestResult& r : results) {
    input_lens.push_back(r.prompt_tokens);
    output_lens.push_back(r.output_tokens);
    starts.push_back(r.start_s);
    ttfts.push_back(r.ttft_s);
    e2els.push_back(r.e2el_s);
    itls.push_back(r.itl_s);
    errors.push_back(r.error);
  }
  j["input_lens"] = std::move(input_lens);
  j["output_lens"] = std::move(output_lens);
  j["start_times"] = std::move(starts);
  j["ttfts"] = std::move(ttfts);
  j["e2els"] = std::move(e2els);
  j["itls"] = std::move(itls);
  j["errors"] = std::move(errors);
  return j;
}

// ---- SVG ----------------------------------------------------------------------

namespace {

constexpr int kPanelW = 420, kPanelH = 260;
constexpr int kLeft = 60, kRight = 16, kTop = 28, kBottom = 40;


// A latency in ms as a short label: 0.5ms, 12ms, 3.4s.
std::string MsLabel(double ms) {
  if (ms >= 1000) return Fmt("%gs", ms / 1000);
  return Fmt("%gms", ms);
}

struct Panel {
  int x0, y0;  // top-left corner of the panel
  double px(double fx) const { return x0 + kLeft + fx * (kPanelW - kLeft - kRight); }
  double py(double fy) const { return y0 + kTop + (1 - fy) * (kPanelH - kTop - kBottom); }
};

void PanelFrame(std::string& svg, const Panel& p, const std::string& title,
                const std::string& x_label) {
  svg += "<text x='" + Fmt("%.0f", p.x0 + kPanelW / 2.0) + "' y='" + Fmt("%.0f", p.y0 + 18.0) +
         "' text-anchor='middle' font-weight='bold'>" + HtmlEscape(title) + "</text>\n";
  svg += "<rect x='" + Fmt("%.1f", p.px(0)) + "' y='" + Fmt("%.1f", p.py(1)) + "' width='" +
         Fmt("%.1f", p.px(1) - p.px(0)) + "' height='" + Fmt("%.1f", p.py(0) - p.py(1)) +
         "' fill='none' stroke='#888'/>\n";
  svg += "<text x='" + Fmt("%.0f", (p.px(0) + p.px(1)) / 2) + "' y='" +
         Fmt("%.0f", p.y0 + kPanelH - 6.0) + "' text-anchor='middle' font-size='11'>" +
         HtmlEscape(x_label) + "</text>\n";
}

void XTick(std::string& svg, const Panel& p, double fx, const std::string& label) {
  const double x = p.px(fx);
  svg += "<line x1='" + Fmt("%.1f", x) + "' x2='" + Fmt("%.1f", x) + "' y1='" +
         Fmt("%.1f", p.py(1)) + "' y2='" + Fmt("%.1f", p.py(0)) + "' stroke='#ddd'/>\n";
  svg += "<text x='" + Fmt("%.1f", x) + "' y='" + Fmt("%.1f", p.py(0) + 13) +
         "' text-anchor='middle' font-size='10'>" + label + "</text>\n";
}

void YTick(std::string& svg, const Panel& p, double fy, const std::string& label) {
  const double y = p.py(fy);
  svg += "<line x1='" + Fmt("%.1f", p.px(0)) + "' x2='" + Fmt("%.1f", p.px(1)) + "' y1='" +
         Fmt("%.1f", y) + "' y2='" + Fmt("%.1f", y) + "' stroke='#eee'/>\n";
  svg += "<text x='" + Fmt("%.1f", p.px(0) - 4) + "' y='" + Fmt("%.1f", y + 3) +
         "' text-anchor='end' font-size='10'>" + label + "</text>\n";
}

// The 1, 2 or 5 x 10^k nearest to v from below (or above when up).
double Nice125(double v, bool up) {
  const double d = std::pow(10, std::floor(std::log10(v)));
  if (up) {
    for (double m : {1.0, 2.0, 5.0, 10.0}) {
      if (d * m >= v * 0.999999) return d * m;
    }
    return d * 10;
  }
  for (double m : {5.0, 2.0, 1.0}) {
    if (d * m <= v * 1.000001) return d * m;
  }
  return d;
}

// Empirical CDF of values (ms) on a log x axis, with p50/p90/p99 marked.
void CdfPanel(std::string& svg, const Panel& p, const std::string& title,
              std::vector<double> ms, const LatencyStats& st) {
  PanelFrame(svg, p, title + " (n=" + std::to_string(ms.size()) + ")", "ms (log scale)");
  for (double f : {0.0, 0.25, 0.5, 0.75, 0.9, 1.0}) YTick(svg, p, f, Fmt("%g", f));
  ms.erase(std::remove_if(ms.begin(), ms.end(), [](double v) { return !(v > 0); }), ms.end());
  if (ms.empty()) return;
  std::sort(ms.begin(), ms.end());
  // Axis from the 1-2-5 value at or below the smallest to the one at or
  // above the largest, so the curve fills the panel.
  const double lo = Nice125(ms.front(), /*up=*/false);
  double hi = Nice125(ms.back(), /*up=*/true);
  if (hi <= lo) hi = Nice125(lo * 1.01, /*up=*/true);
  const double span = std::log10(hi) - std::log10(lo);
  auto fx = [&](double v) { return (std::log10(std::max(v, lo)) - std::log10(lo)) / span; };
  for (double d = std::pow(10, std::floor(std::log10(lo))); d <= hi * 1.001; d *= 10) {
    for (double m : {1.0, 2.0, 5.0}) {
      const double v = d * m;
      if (v < lo * 0.999 || v > hi * 1.001 || (m > 1 && span > 4)) continue;
      XTick(svg, p, fx(v), MsLabel(v));
    }
  }
  // Step curve, thinned to at most ~600 points.
  std::string pts;
  const size_t stride = std::max<size_t>(1, ms.size() / 600);
  for (size_t i = 0; i < ms.size(); i += stride) {
    const double f0 = (double)i / ms.size(), f1 = (double)(i + 1) / ms.size();
    pts += Fmt("%.1f,", p.px(fx(ms[i]))) + Fmt("%.1f ", p.py(f0));
    pts += Fmt("%.1f,", p.px(fx(ms[i]))) + Fmt("%.1f ", p.py(f1));
  }
  pts += Fmt("%.1f,", p.px(fx(ms.back()))) + Fmt("%.1f", p.py(1));
  svg += "<polyline fill='none' stroke='#1f77b4' stroke-width='1.5' points='" + pts + "'/>\n";
  const std::pair<const char*, double> marks[] = {
      {"p50", st.median}, {"p90", st.p90}, {"p99", st.p99}};
  int row = 0;
  for (const auto& [name, v] : marks) {
    if (!(v > 0)) continue;
    const double x = p.px(fx(v));
    svg += "<line x1='" + Fmt("%.1f", x) + "' x2='" + Fmt("%.1f", x) + "' y1='" +
           Fmt("%.1f", p.py(1)) + "' y2='" + Fmt("%.1f", p.py(0)) +
           "' stroke='#d62728' stroke-dasharray='3,3'/>\n";
    svg += "<text x='" + Fmt("%.1f", p.px(0) + 6) + "' y='" + Fmt("%.1f", p.py(1) + 14 + 13 * row++) +
           "' font-size='11' fill='#d62728'>" + name + " " + MsLabel(std::round(v * 100) / 100) +
           "</text>\n";
  }
}

// A "nice" axis maximum (1, 2, 5 x 10^k) at or above v.
double NiceMax(double v) {
  if (!(v > 0)) return 1;
  const double d = std::pow(10, std::floor(std::log10(v)));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (d * m >= v) return d * m;
  }
  return d * 10;
}

// TTFT (s) of each request against when it was sent (s); failures as red x.
void TtftOverTimePanel(std::string& svg, const Panel& p,
                       const std::vector<ServeRequestResult>& results, double duration_s) {
  PanelFrame(svg, p, "TTFT over time", "request sent at (s since start)");
  double max_t = duration_s, max_y = 0;
  for (const ServeRequestResult& r : results) {
    max_t = std::max(max_t, r.start_s);
    if (r.success) max_y = std::max(max_y, r.ttft_s);
  }
  const double xmax = NiceMax(max_t), ymax = NiceMax(max_y);
  for (int i = 0; i <= 4; ++i) {
    XTick(svg, p, i / 4.0, Fmt("%g", xmax * i / 4));
    YTick(svg, p, i / 4.0, Fmt("%gs", ymax * i / 4));
  }
  for (const ServeRequestResult& r : results) {
    const double x = p.px(r.start_s / xmax);
    if (r.success) {
      svg += "<circle cx='" + Fmt("%.1f", x) + "' cy='" + Fmt("%.1f", p.py(r.ttft_s / ymax)) +
             "' r='2.5' fill='#1f77b4' fill-opacity='0.6'/>\n";
    } else {
      svg += "<text x='" + Fmt("%.1f", x) + "' y='" + Fmt("%.1f", p.py(0) - 2) +
             "' text-anchor='middle' font-size='12' fill='#d62728'>x</text>\n";
    }
  }
}

void SummaryPanel(std::string& svg, const Panel& p, const ServeBenchSummary& s) {
  PanelFrame(svg, p, "Summary", "");
  const std::string lines[] = {
      Fmt("requests: %.0f ok", s.completed) + Fmt(", %.0f failed", s.failed),
      Fmt("duration: %.2f s", s.duration_s),
      Fmt("output: %.2f tok/s", s.output_throughput),
      Fmt("requests: %.3f req/s", s.request_throughput) +
          Fmt(", goodput %.3f req/s", s.request_goodput),
      Fmt("TTFT p50 %.1f ms", s.ttft.median) + Fmt(", p99 %.1f ms", s.ttft.p99),
      Fmt("TPOT p50 %.1f ms", s.tpot.median) + Fmt(", p99 %.1f ms", s.tpot.p99),
      Fmt("ITL  p50 %.1f ms", s.itl.median) + Fmt(", p99 %.1f ms", s.itl.p99),
      Fmt("E2EL p50 %.1f ms", s.e2el.median) + Fmt(", p99 %.1f ms", s.e2el.p99),
  };
  int row = 0;
  for (const std::string& l : lines) {
    svg += "<text x='" + Fmt("%.1f", p.px(0) + 10) + "' y='" + Fmt("%.1f", p.py(1) + 20 + 22 * row++) +
           "' font-size='13' font-family='monospace'>" + HtmlEscape(l) + "</text>\n";
  }
}

}  // namespace

std::string ServeLatencySvg(const ServeBenchSummary& s,
                            const std::vector<ServeRequestResult>& results,
                            const std::string& title) {
  const int width = 3 * kPanelW, height = 2 * kPanelH + 40;
  std::string svg = "<svg xmlns='http://www.w3.org/2000/svg' width='" + std::to_string(width) +
                    "' height='" + std::to_string(height) + "' viewBox='0 0 " +
                    std::to_string(width) + " " + std::to_string(height) +
                    "' font-family='sans-serif' font-size='12'>\n";
  svg += "<rect width='100%' height='100%' fill='white'/>\n";
  svg += "<text x='12' y='24' font-size='15' font-weight='bold'>" + HtmlEscape(title) + "</text>\n";
  std::vector<double> ttft, tpot, itl, e2el;
  for (const ServeRequestResult& r : results) {
    if (!r.success) continue;
    ttft.push_back(r.ttft_s * 1e3);
    e2el.push_back(r.e2el_s * 1e3);
    if (r.output_tokens >= 2) tpot.push_back(RequestTpot(r) * 1e3);
    for (double g : r.itl_s) itl.push_back(g * 1e3);
  }
  auto at = [](int col, int row) { return Panel{col * kPanelW, 40 + row * kPanelH}; };
  CdfPanel(svg, at(0, 0), "TTFT CDF", ttft, s.ttft);
  CdfPanel(svg, at(1, 0), "TPOT CDF", tpot, s.tpot);
  CdfPanel(svg, at(2, 0), "ITL CDF", itl, s.itl);
  CdfPanel(svg, at(0, 1), "E2E latency CDF", e2el, s.e2el);
  TtftOverTimePanel(svg, at(1, 1), results, s.duration_s);
  SummaryPanel(svg, at(2, 1), s);
  svg += "</svg>\n";
  return svg;
}

}  // namespace tern
