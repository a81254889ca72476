#include "tools/doctor_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "base/progress.h"
#include "kv/kv_config.h"
#include "tools/report_text.h"

namespace tern {
namespace {


std::string VerifyTable(const std::vector<VerifyRun>& runs) {
  std::string out =
      "| run | goodput req/s | good/completed | output tok/s | TTFT p50/p99 ms | TPOT p50/p99 ms |\n"
      "|---|---|---|---|---|---|\n";
  for (const VerifyRun& v : runs) {
    if (!v.error.empty()) {
      out += "| " + v.label + " | failed: " + v.error + " | | | | |\n";
      continue;
    }
    out += "| " + v.label + Fmt(" | %.2f | %.0f/%.0f", v.request_goodput, v.good, v.completed) +
           Fmt(" | %.0f | %.1f / %.1f", v.output_throughput, v.ttft_p50_ms, v.ttft_p99_ms) +
           Fmt(" | %.2f / %.2f |\n", v.tpot_p50_ms, v.tpot_p99_ms);
  }
  return out;
}

// ---- SVG ---------------------------------------------------------------------------

struct Axis {
  double lo, hi;
  bool log;
  double Map(double v, double a, double b) const {
    const double t = log ? (std::log10(std::max(v, lo)) - std::log10(lo)) /
                               (std::log10(hi) - std::log10(lo))
                         : (v - lo) / (hi - lo);
    return a + (b - a) * std::clamp(t, -0.05, 1.05);
  }
};

constexpr double kW = 560, kH = 300, kL = 60, kR = 16, kT = 28, kB = 40;

// The smallest 1, 2, 2.5 or 5 x 10^k at least v (axis ends with round ticks).
double NiceCeil(double v) {
  const double p = std::pow(10, std::floor(std::log10(std::max(v, 1e-9))));
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0}) {
    if (v <= m * p) return m * p;
  }
  return 10 * p;
}

std::string SvgOpen(const std::string& title) {
  return Fmt("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" ", kW, kH) +
         "font-family=\"sans-serif\" font-size=\"11\"><rect width=\"100%\" height=\"100%\" "
         "fill=\"white\"/><text x=\"8\" y=\"16\" font-size=\"13\" font-weight=\"bold\">" +
         HtmlEscape(title) + "</text>";
}

std::string Frame(const Axis& x, const Axis& y, const std::string& xlabel,
                  const std::string& ylabel) {
  std::string g = Fmt("<rect x=\"%.0f\" y=\"%.0f\" width=\"%.0f\" height=\"%.0f\" fill=\"none\" "
                    "stroke=\"#999\"/>",
                    kL, kT, kW - kL - kR, kH - kT - kB);
  auto ticks = [](const Axis& a) {
    std::vector<double> t;
    if (a.log) {
      for (double v = std::pow(10, std::floor(std::log10(a.lo))); v <= a.hi * 1.001; v *= 10) {
        if (v >= a.lo * 0.999) t.push_back(v);
      }
    } else {
      for (int i = 0; i <= 4; ++i) t.push_back(a.lo + (a.hi - a.lo) * i / 4);
    }
    return t;
  };
  for (double v : ticks(x)) {
    const double px = x.Map(v, kL, kW - kR);
    g += Fmt("<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.0f\" y2=\"%.0f\" stroke=\"#eee\"/>", px, px, kT,
           kH - kB);
    g += Fmt("<text x=\"%.1f\" y=\"%.0f\" text-anchor=\"middle\">%g</text>", px, kH - kB + 14, v);
  }
  for (double v : ticks(y)) {
    const double py = y.Map(v, kH - kB, kT);
    g += Fmt("<line x1=\"%.0f\" x2=\"%.0f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#eee\"/>", kL, kW - kR,
           py, py);
    g += Fmt("<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\">%g</text>", kL - 4, py + 4, v);
  }
  g += Fmt("<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\">", (kL + kW - kR) / 2, kH - 8) +
       HtmlEscape(xlabel) + "</text>";
  g += Fmt("<text x=\"12\" y=\"%.0f\" transform=\"rotate(-90 12 %.0f)\" text-anchor=\"middle\">",
         (kT + kH - kB) / 2, (kT + kH - kB) / 2) +
       HtmlEscape(ylabel) + "</text>";
  return g;
}

std::string Circle(double px, double py, const char* color) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"5\" fill=\"%s\"/>", px, py,
                color);
  return buf;
}

std::string RooflineSvg(const DoctorReport& r) {
  const ModelFigures& m = r.model;
  const double params2 = 2.0 * (double)m.layer_matmul_params;
  const double w = (double)std::max<int64_t>(1, m.weight_bytes);
  const double kv = (double)r.diagnosis.kv_bytes_per_token;
  struct P { double ai, gflops; std::string label; const char* color; };
  std::vector<P> pts = {
      {params2 * m.pp_tokens / w, m.pp_tps * params2 / 1e9,
       Fmt("prefill %.0f tok", m.pp_tokens), "#e8773b"},
      {params2 / (w + kv * m.tg_depth), m.tg_tps * params2 / 1e9, "decode B=1", "#2f6fdf"},
      {params2 * m.batch / (w + m.batch * kv * m.tg_depth), m.batch_tg_tps * params2 / 1e9,
       Fmt("decode B=%.0f", m.batch), "#2a9d5c"}};
  double ai_lo = 0.01, ai_hi = 1000, y_lo = 0.1, y_hi = 10;
  for (const P& p : pts) {
    ai_lo = std::min(ai_lo, p.ai / 2);
    ai_hi = std::max(ai_hi, p.ai * 2);
    y_lo = std::min(y_lo, std::max(1e-3, p.gflops / 2));
  }
  y_hi = std::max(y_hi, r.machine.fma_gflops * 2);
  Axis x{std::pow(10, std::floor(std::log10(ai_lo))), std::pow(10, std::ceil(std::log10(ai_hi))), true};
  Axis y{std::pow(10, std::floor(std::log10(y_lo))), std::pow(10, std::ceil(std::log10(y_hi))), true};
  std::string g = SvgOpen("Roofline: this machine and this model") +
                  Frame(x, y, "arithmetic intensity (FLOP per byte read)", "GFLOP/s");
  // The roof: min(peak, bandwidth x intensity).
  std::string d;
  for (int i = 0; i <= 100; ++i) {
    const double ai = x.lo * std::pow(x.hi / x.lo, i / 100.0);
    const double roof = std::min(r.machine.fma_gflops, r.machine.read_gb_s * ai);
    d += (i ? "L" : "M") + Fmt("%.1f %.1f ", x.Map(ai, kL, kW - kR), y.Map(roof, kH - kB, kT));
  }
  g += "<path d=\"" + d + "\" fill=\"none\" stroke=\"#333\" stroke-width=\"2\"/>";
  g += Fmt("<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"end\">", kW - kR - 4, y.Map(r.machine.fma_gflops, kH - kB, kT) - 4) +
       Fmt("FMA peak %.0f GFLOP/s; bandwidth %.1f GB/s</text>", r.machine.fma_gflops, r.machine.read_gb_s);
  for (const P& p : pts) {
    const double px = x.Map(p.ai, kL, kW - kR), py = y.Map(std::max(p.gflops, y.lo), kH - kB, kT);
    g += Circle(px, py, p.color);
    g += Fmt("<text x=\"%.1f\" y=\"%.1f\">", px + 7, py - 6) + HtmlEscape(p.label) + "</text>";
  }
  return g + "</svg>";
}

std::string LengthsSvg(const DoctorReport& r) {
  double max_len = 1;
  for (double v : r.prompt_lens) max_len = std::max(max_len, v);
  for (double v : r.output_lens) max_len = std::max(max_len, v);
  const int bins = 30;
  const double bw = max_len / bins;
  std::vector<int> hp(bins + 1), ho(bins + 1);
  for (double v : r.prompt_lens) ++hp[std::min(bins, (int)(v / bw))];
  for (double v : r.output_lens) ++ho[std::min(bins, (int)(v / bw))];
  int top = 1;
  for (int i = 0; i <= bins; ++i) top = std::max({top, hp[i], ho[i]});
  Axis x{0, NiceCeil(max_len * 1.02), false}, y{0, NiceCeil((double)top), false};
  std::string g = SvgOpen("Workload lengths (tokens): prompts and outputs, with p50 and p95") +
                  Frame(x, y, "tokens", "requests");
  auto bars = [&](const std::vector<int>& h, const char* color, double shift) {
    std::string s;
    for (int i = 0; i <= bins; ++i) {
      if (!h[i]) continue;
      const double x0 = x.Map(i * bw, kL, kW - kR), x1 = x.Map((i + 1) * bw, kL, kW - kR);
      const double y0 = y.Map(h[i], kH - kB, kT);
      char buf[200];
      std::snprintf(buf, sizeof buf,
                    "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\" "
                    "opacity=\"0.7\"/>",
                    x0 + shift * (x1 - x0) / 2, y0, std::max(1.0, (x1 - x0) / 2), kH - kB - y0, color);
      s += buf;
    }
    return s;
  };
  g += bars(hp, "#e8773b", 0) + bars(ho, "#2f6fdf", 1);
  int marks = 0;
  auto mark = [&](double v, const char* color, const std::string& label) {
    const double px = x.Map(v, kL, kW - kR);
    const bool right_edge = px > kW - 120;  // label on the line's left near the edge
    char buf[260];
    std::snprintf(buf, sizeof buf,
                  "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.0f\" y2=\"%.0f\" stroke=\"%s\" "
                  "stroke-dasharray=\"4 3\"/><text x=\"%.1f\" y=\"%.0f\" fill=\"%s\" "
                  "text-anchor=\"%s\">",
                  px, px, kT, kH - kB, color, right_edge ? px - 3 : px + 3, kT + 12 + 14 * marks++,
                  color, right_edge ? "end" : "start");
    return std::string(buf) + HtmlEscape(label) + "</text>";
  };
  g += mark(r.workload.prompt.p95, "#b4501b", Fmt("prompt p95 %.0f", r.workload.prompt.p95));
  g += mark(r.workload.output.p95, "#1f4fa8", Fmt("output p95 %.0f", r.workload.output.p95));
  return g + "</svg>";
}

std::string KvSvg(const DoctorReport& r) {
  const Diagnosis& d = r.diagnosis;
  const int cmax = std::max(4, 2 * std::max(r.options.concurrency, d.max_num_seqs));
  const double per = (double)d.kv_bytes_per_request / (1 << 20);
  const double budget = (double)d.kv_budget_bytes / (1 << 20);
  const double ytop = std::max(per * cmax, (double)d.kv_cache_memory_bytes / (1 << 20)) * 1.1;
  Axis x{0, (double)cmax, false}, y{0, std::max(ytop, 1e-3), false};
  std::string g = SvgOpen("KV cache (MiB) needed vs concurrency, at the p95 request length") +
                  Frame(x, y, "requests in flight", "MiB");
  g += Fmt("<path d=\"M%.1f %.1f L%.1f %.1f\" stroke=\"#2f6fdf\" stroke-width=\"2\"/>",
         x.Map(0, kL, kW - kR), y.Map(0, kH - kB, kT), x.Map(cmax, kL, kW - kR),
         y.Map(per * cmax, kH - kB, kT));
  int lines = 0;
  auto hline = [&](double v, const char* color, const std::string& label) {
    if (v > y.hi) {
      return Fmt("<text x=\"%.0f\" y=\"%.0f\">", kL + 4, kT + 12) + HtmlEscape(label) +
             " (above the chart)</text>";
    }
    const double py = y.Map(v, kH - kB, kT);
    char buf[200];
    std::snprintf(buf, sizeof buf,
                  "<line x1=\"%.0f\" x2=\"%.0f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
                  "stroke-dasharray=\"5 3\"/><text x=\"%.0f\" y=\"%.1f\" fill=\"%s\">",
                  kL, kW - kR, py, py, color, kL + 4, lines++ == 0 ? py - 4 : py + 13, color);
    return std::string(buf) + HtmlEscape(label) + "</text>";
  };
  g += hline(budget, "#b42318", "KV budget " + FormatBytes((double)d.kv_budget_bytes));
  g += hline((double)d.kv_cache_memory_bytes / (1 << 20), "#2a9d5c",
             "recommended --kv-cache-memory " + FormatBytes((double)d.kv_cache_memory_bytes));
  const double px = x.Map(d.max_num_seqs, kL, kW - kR), py = y.Map(per * d.max_num_seqs, kH - kB, kT);
  g += Circle(px, py, "#2a9d5c");
  g += Fmt("<text x=\"%.1f\" y=\"%.1f\">--max-num-seqs %.0f</text>", px + 7, py + 14, d.max_num_seqs);
  return g + "</svg>";
}

std::string VerifySvg(const DoctorReport& r) {
  if (r.verify.size() < 2) return "";
  struct M { const char* name; double VerifyRun::*field; };
  const M ms[] = {{"TTFT p50", &VerifyRun::ttft_p50_ms}, {"TTFT p99", &VerifyRun::ttft_p99_ms},
                  {"TPOT p50", &VerifyRun::tpot_p50_ms}, {"TPOT p99", &VerifyRun::tpot_p99_ms}};
  // Each percentile on its own scale (TTFT and TPOT differ by orders of magnitude).
  double tops[4] = {1e-3, 1e-3, 1e-3, 1e-3};
  for (const VerifyRun& v : r.verify)
    for (int i = 0; i < 4; ++i) tops[i] = std::max(tops[i], v.*(ms[i].field));
  Axis x{0, 4, false};
  std::string g = SvgOpen("--verify: latency percentiles (ms, each on its own scale)") +
                  Fmt("<rect x=\"%.0f\" y=\"%.0f\" width=\"%.0f\" height=\"%.0f\" fill=\"none\" stroke=\"#999\"/>",
                    kL, kT, kW - kL - kR, kH - kT - kB);
  const char* colors[] = {"#8a8f98", "#2a9d5c", "#2f6fdf"};
  for (int i = 0; i < 4; ++i) {
    const double x0 = x.Map(i + 0.15, kL, kW - kR), x1 = x.Map(i + 0.85, kL, kW - kR);
    const double bw = (x1 - x0) / r.verify.size();
    const Axis y{0, tops[i] * 1.45, false};  // room for the legend
    for (size_t k = 0; k < r.verify.size(); ++k) {
      const double v = r.verify[k].*(ms[i].field);
      const double py = y.Map(v, kH - kB, kT);
      char buf[240];
      std::snprintf(buf, sizeof buf,
                    "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"/>"
                    "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%.1f</text>",
                    x0 + k * bw, py, bw - 2, kH - kB - py, colors[k % 3], x0 + (k + 0.5) * bw,
                    py - 3, v);
      g += buf;
    }
    g += Fmt("<text x=\"%.1f\" y=\"%.0f\" text-anchor=\"middle\">", (x0 + x1) / 2, kH - kB + 14) +
         ms[i].name + "</text>";
  }
  for (size_t k = 0; k < r.verify.size(); ++k) {
    g += Fmt("<rect x=\"%.0f\" y=\"%.0f\" width=\"10\" height=\"10\" fill=\"", kW - 190, kT + 6 + 14 * k) +
         colors[k % 3] + "\"/>" +
         Fmt("<text x=\"%.0f\" y=\"%.0f\">", kW - 176, kT + 15 + 14 * k) + HtmlEscape(r.verify[k].label) +
         Fmt(": goodput %.2f req/s</text>", r.verify[k].request_goodput);
  }
  return g + "</svg>";
}

nlohmann::json FindingsJson(const Diagnosis& d) {
  nlohmann::json a = nlohmann::json::array();
  for (const Finding& f : d.findings) a.push_back({{"topic", f.topic}, {"verdict", f.verdict}, {"details", f.details}});
  return a;
}

}  // namespace

std::string ReportText(const DoctorReport& r) {
  const MachineFigures& mc = r.machine;
  const ModelFigures& m = r.model;
  const WorkloadProfile& w = r.workload;
  const Diagnosis& d = r.diagnosis;
  std::string out = "tern doctor\n\n";
  out += Fmt("machine: %.1f GB/s memory read, %.0f GFLOP/s FMA peak, %.0f threads, ", mc.read_gb_s,
           mc.fma_gflops, mc.threads) +
         FormatBytes((double)mc.mem_available_bytes) + " free\n";
  out += "model: " + m.path + " (" + m.arch + ", " + m.weight_type + ", " +
         FormatBytes((double)m.weight_bytes) + Fmt(" of weights, %.1fM layer parameters, context %.0f)\n",
                                                 (double)m.layer_matmul_params / 1e6, m.context_len);
  out += Fmt("  measured: prefill %.0f tok/s (%.0f-token prompt)", m.pp_tps, m.pp_tokens) +
         (m.pp_long_tokens > 0 ? Fmt(", %.0f tok/s (%.0f-token prompt)", m.pp_long_tps, m.pp_long_tokens)
                               : "") +
         Fmt("; decode %.1f tok/s (1 sequence at depth %.0f), ", m.tg_tps, m.tg_depth) +
         Fmt("%.1f tok/s (%.0f sequences together)\n", m.batch_tg_tps, m.batch);
  out += Fmt("workload: %.0f requests, ", w.num_requests) + r.workload_source + "\n";
  out += Fmt("  prompt tokens p50 %.0f p95 %.0f max %.0f; ", w.prompt.p50, w.prompt.p95, w.prompt.max) +
         Fmt("output tokens p50 %.0f p95 %.0f max %.0f; ", w.output.p50, w.output.p95, w.output.max) +
         Fmt("shared-prefix share %.1f%%; KV per request (p95) ", 100 * w.shared_prefix_share) +
         FormatBytes((double)d.kv_bytes_per_request) + "\n\n";
  int n = 1;
  for (const Finding& f : d.findings) {
    out += std::to_string(n++) + ". " + f.verdict + "\n";
    for (const std::string& line : f.details) out += "   - " + line + "\n";
  }
  out += std::to_string(n++) + ". quantization: " + r.quantization + "\n";
  out += std::to_string(n++) + ". speculation: " + r.speculation + "\n\n";
  out += "recommended flags (tern serve / tern batch):\n  " + FlagsLine(d) + "\n";
  for (const FlagValue& f : d.flags) {
    out += "    " + f.flag + (f.value.empty() ? "" : " " + f.value) + ": " + f.why + "\n";
  }
  if (!r.verify.empty()) {
    out += Fmt("\n--verify: the workload through tern serve + tern bench serve (goodput bounds TTFT "
             "%.0f ms, TPOT %.1f ms; medians of %.0f alternated runs per side)\n",
             d.slo_ttft_ms, d.slo_tpot_ms, r.verify[0].repeats) +
           VerifyTable(r.verify);
    for (const VerifyRun& v : r.verify) {
      out += "  " + v.label + ": " + (v.flags.empty() ? "(engine defaults)" : v.flags) + "\n";
    }
    if (r.verify.size() == 2 && r.verify[0].error.empty() && r.verify[1].error.empty()) {
      const double before = r.verify[0].request_goodput, after = r.verify[1].request_goodput;
      out += before > 0 ? Fmt("  goodput %.2f -> %.2f req/s (%+.0f%%)\n", before, after,
                            100 * (after - before) / before)
                        : Fmt("  goodput %.2f -> %.2f req/s\n", before, after);
    }
  }
  return out;
}

nlohmann::json ReportJson(const DoctorReport& r) {
  const Diagnosis& d = r.diagnosis;
  nlohmann::json j;
  j["machine"] = {{"read_gb_s", r.machine.read_gb_s}, {"fma_gflops", r.machine.fma_gflops},
                  {"threads", r.machine.threads}, {"mem_available_bytes", r.machine.mem_available_bytes}};
  const ModelFigures& m = r.model;
  j["model"] = {{"path", m.path}, {"arch", m.arch}, {"weight_type", m.weight_type},
                {"weight_bytes", m.weight_bytes}, {"layer_matmul_params", m.layer_matmul_params},
                {"kv_bytes_per_token_f16",
                 KvBytesPerToken(m.n_layer, m.n_head_kv, m.head_dim, DType::kF16, DType::kF16)}, {"context_len", m.context_len},
                {"pp_tokens", m.pp_tokens}, {"pp_tps", m.pp_tps},
                {"pp_long_tokens", m.pp_long_tokens}, {"pp_long_tps", m.pp_long_tps},
                {"tg_depth", m.tg_depth},
                {"tg_tps", m.tg_tps}, {"batch", m.batch}, {"batch_tg_tps", m.batch_tg_tps}};
  auto lens = [](const LengthStats& s) {
    return nlohmann::json{{"mean", s.mean}, {"p50", s.p50}, {"p95", s.p95}, {"max", s.max}};
  };
  const WorkloadProfile& w = r.workload;
  j["workload"] = {{"source", r.workload_source}, {"num_requests", w.num_requests},
                   {"prompt", lens(w.prompt)}, {"output", lens(w.output)}, {"total", lens(w.total)},
                   {"block_size", w.block_size}, {"shared_prefix_share", w.shared_prefix_share},
                   {"distinct_shared_tokens", w.distinct_shared_tokens}};
  j["diagnosis"] = {
      {"bound", d.prefill_bound ? "prefill" : "decode"},
      {"prefill_ms_per_request", 1e3 * d.prefill_s_per_request},
      {"decode_ms_per_request", 1e3 * d.decode_s_per_request},
      {"prefill_roofline_tps", d.prefill_roofline_tps}, {"prefill_roofline_fraction", d.prefill_fraction},
      {"decode_roofline_tps", d.decode_roofline_tps}, {"decode_roofline_fraction", d.decode_fraction},
      {"decode_step_ms", {{"a", 1e3 * d.step_a_s}, {"b_per_seq", 1e3 * d.step_b_s}}},
      {"memory", d.capacity_limited ? "capacity" : "bandwidth"},
      {"kv_bytes_per_token", d.kv_bytes_per_token}, {"kv_bytes_per_request", d.kv_bytes_per_request},
      {"kv_needed_bytes", d.kv_needed_bytes}, {"kv_budget_bytes", d.kv_budget_bytes},
      {"fit_concurrency", d.fit_concurrency},
      {"slo_ttft_ms", d.slo_ttft_ms}, {"slo_tpot_ms", d.slo_tpot_ms},
      {"expected_prefix_hit_rate", d.expected_hit_rate},
      {"defaults_right", d.defaults_right},
      {"findings", FindingsJson(d)}};
  nlohmann::json flags = nlohmann::json::array();
  for (const FlagValue& f : d.flags) flags.push_back({{"flag", f.flag}, {"value", f.value}, {"why", f.why}});
  j["recommended"] = {{"flags", flags}, {"command_line", FlagsLine(d)},
                      {"max_model_len", d.max_model_len}, {"max_num_seqs", d.max_num_seqs},
                      {"kv_cache_memory_bytes", d.kv_cache_memory_bytes}, {"kv_cache_dtype", d.kv_dtype},
                      {"enable_prefix_caching", d.prefix_caching}, {"target_itl_ms", d.target_itl_ms}};
  j["quantization"] = r.quantization;
  j["speculation"] = r.speculation;
  nlohmann::json v = nlohmann::json::array();
  for (const VerifyRun& x : r.verify) {
    v.push_back({{"label", x.label}, {"flags", x.flags}, {"error", x.error}, {"completed", x.completed},
                 {"failed", x.failed}, {"good", x.good}, {"repeats", x.repeats}, {"duration_s", x.duration_s},
                 {"request_goodput", x.request_goodput}, {"output_throughput", x.output_throughput},
                 {"ttft_p50_ms", x.ttft_p50_ms}, {"ttft_p99_ms", x.ttft_p99_ms},
                 {"tpot_p50_ms", x.tpot_p50_ms}, {"tpot_p99_ms", x.tpot_p99_ms}});
  }
  j["verify"] = v;
  return j;
}

std::string ReportHtml(const DoctorReport& r) {
  std::string out =
      "<!doctype html><html><head><meta charset=\"utf-8\"><title>tern doctor</title><style>"
      "body{font:14px/1.45 system-ui,sans-serif;margin:24px;max-width:1200px;color:#1d2430}"
      "pre{background:#f6f7f9;padding:12px;border-radius:6px;white-space:pre-wrap}"
      ".plots{display:flex;flex-wrap:wrap;gap:12px}.plots svg{border:1px solid #e3e6ea;border-radius:6px}"
      "</style></head><body><h1>tern doctor</h1>";
  out += "<h2>Recommended flags</h2><pre>" + HtmlEscape(FlagsLine(r.diagnosis)) + "</pre>";
  out += "<div class=\"plots\">" + RooflineSvg(r) + LengthsSvg(r) + KvSvg(r) + VerifySvg(r) + "</div>";
  out += "<h2>Report</h2><pre>" + HtmlEscape(ReportText(r)) + "</pre></body></html>\n";
  return out;
}

}  // namespace tern
