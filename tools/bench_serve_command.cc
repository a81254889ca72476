// `tern bench serve`: a load generator for any OpenAI-compatible server (tern
// serve, llama-server, vLLM), after `vllm bench serve`. It builds a list of
// prompts (random token ids, a shared prefix + random suffix, or a JSONL
// file), sends them as streaming /v1/completions (or /v1/chat/completions)
// requests on a Poisson schedule (or all at once) under a concurrency cap,
// times every streamed chunk, and reports throughput, TTFT/TPOT/ITL/E2EL and
// goodput (tools/bench_serve_report.h). With --instance-metrics it reads the
// /metrics of each instance behind a load balancer before and after the run
// and reports their request spread and prefix-cache hit rate
// (tools/bench_serve_instances.h).
//
// One thread per in-flight request, each with its own libcurl easy handle;
// the launching thread sleeps until each request's arrival time, then waits
// for a free slot (--max-concurrency). Progress goes to stderr, the result
// table to stdout.
#include <curl/curl.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <memory>
#include <mutex>
#include <random>
#include <semaphore>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/atomic_file.h"
#include "base/status.h"
#include "gguf/gguf_file.h"
#include "sample/request_checks.h"
#include "tokenizer/tokenizer.h"
#include "tools/arg_parser.h"
#include "tools/bench_serve_instances.h"
#include "tools/bench_serve_report.h"
#include "tools/commands.h"
#include "tools/common_flags.h"

namespace tern {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

struct BenchServeOptions {
  std::string base_url = "http://127.0.0.1:8080";
  std::string endpoint = "/v1/completions";
  std::string model_name;  // "" = the first id of GET /v1/models
  std::string model_path;  // tokenizer source (-m)
  std::string tokenizer_path;
  std::string api_key;
  std::string dataset_name = "random";
  int64_t num_prompts = 1000;
  int64_t random_input_len = 1024;
  int64_t random_output_len = 128;
  double random_range_ratio = 0;
  int64_t random_prefix_len = 0;
  int64_t prefix_len = 256;
  int64_t suffix_len = 256;
  int64_t num_prefixes = 10;
  int64_t prefix_output_len = 128;
  std::string dataset_path;
  int64_t file_output_len = 128;
  std::string prompt_format = "auto";
  std::string request_rate = "inf";
  int64_t max_concurrency = 0;
  bool ignore_eos = false;
  double temperature = 0;
  int64_t seed = 0;
  std::vector<std::string> goodput;
  std::string save_result;
  std::string plot;
  std::string label;
  double request_timeout_s = 0;
  bool skip_test_request = false;
  std::string instance_metrics;  // URL,URL,...

  // Resolved.
  std::vector<std::string> metrics_urls;
  double rate = std::numeric_limits<double>::infinity();
  GoodputSlo slo;
  bool chat = false;
  bool send_ids = true;
};

// One prompt of the dataset: token ids (when built from a vocabulary or
// given as ids) and/or text.
struct BenchPrompt {
  std::vector<int32_t> ids;
  std::string text;
  int32_t num_tokens = 0;  // our count (ids, or our tokenizer's encoding of text)
  int32_t output_len = 0;
};

Status ParseGoodput(const std::vector<std::string>& items, GoodputSlo* slo) {
  for (const std::string& raw : items) {
    std::string all = raw;
    std::replace(all.begin(), all.end(), ',', ' ');
    std::istringstream in(all);
    std::string item;
    while (in >> item) {
      const size_t colon = item.find(':');
      const std::string key = item.substr(0, colon);
      double ms = 0;
      try {
        if (colon == std::string::npos) throw std::invalid_argument("no colon");
        size_t used = 0;
        ms = std::stod(item.substr(colon + 1), &used);
        if (used != item.size() - colon - 1 || !(ms > 0)) throw std::invalid_argument("bad");
      } catch (const std::exception&) {
        return InvalidArgument("--goodput: expected NAME:MS with MS > 0 (ttft, tpot, e2el), got '" +
                               item + "'");
      }
      if (key == "ttft") slo->ttft_ms = ms;
      else if (key == "tpot") slo->tpot_ms = ms;
      else if (key == "e2el") slo->e2el_ms = ms;
      else return InvalidArgument("--goodput: unknown metric '" + key + "' (ttft, tpot, e2el)");
    }
  }
  return Status::Ok();
}

// "URL,URL,...": each an instance's base URL or its /metrics URL.
Status ParseInstanceUrls(const std::string& list, std::vector<std::string>* urls) {
  std::string all = list;
  std::replace(all.begin(), all.end(), ',', ' ');
  std::istringstream in(all);
  std::string url;
  while (in >> url) {
    if (url.rfind("http://", 0) != 0 && url.rfind("https://", 0) != 0) {
      return InvalidArgument("--instance-metrics: each URL must start with http:// or https://, got '" +
                             url + "'");
    }
    while (url.back() == '/') url.pop_back();
    const std::string suffix = "/metrics";
    if (url.size() < suffix.size() || url.compare(url.size() - suffix.size(), suffix.size(), suffix) != 0) {
      url += suffix;
    }
    urls->push_back(url);
  }
  if (!list.empty() && urls->empty()) return InvalidArgument("--instance-metrics: no URL given");
  return Status::Ok();
}

Status Resolve(BenchServeOptions& o, std::vector<std::string>& positional) {
  // `--goodput ttft:2000 tpot:150` as vLLM spells it: extra NAME:MS words.
  for (const std::string& p : positional) {
    if (p.find(':') == std::string::npos) return InvalidArgument("unexpected argument '" + p + "'");
    o.goodput.push_back(p);
  }
  TERN_RETURN_IF_ERROR(ParseGoodput(o.goodput, &o.slo));
  if (o.request_rate != "inf") {
    try {
      size_t used = 0;
      o.rate = std::stod(o.request_rate, &used);
      if (used != o.request_rate.size() || !(o.rate > 0)) throw std::invalid_argument("bad");
    } catch (const std::exception&) {
      return InvalidArgument("--request-rate must be a positive number or 'inf', got '" +
                             o.request_rate + "'");
    }
  }
  if (o.num_prompts < 1) return InvalidArgument("--num-prompts must be >= 1");
  if (o.max_concurrency < 0) return InvalidArgument("--max-concurrency must be >= 0");
  if (!(o.random_range_ratio >= 0 && o.random_range_ratio < 1)) {
    return InvalidArgument("--random-range-ratio must be in [0, 1)");
  }
  if (o.random_input_len < 1 || o.random_output_len < 1 || o.random_prefix_len < 0 ||
      o.prefix_len < 0 || o.suffix_len < 1 || o.num_prefixes < 1 || o.prefix_output_len < 1 ||
      o.file_output_len < 1) {
    return InvalidArgument("dataset lengths must be >= 1 (prefix lengths >= 0)");
  }
  {
    // The server's own range (sample/request_checks.h), refused before any request.
    SamplingParams s;
    s.temperature = (float)o.temperature;
    if (MaybeFieldError e = CheckSamplingRanges(s)) return InvalidArgument(e->Text("--temperature"));
  }
  if (o.request_timeout_s < 0) return InvalidArgument("--request-timeout must be >= 0");
  if (o.dataset_name != "random" && o.dataset_name != "prefix-repetition" &&
      o.dataset_name != "file") {
    return InvalidArgument("--dataset-name must be random, prefix-repetition or file, got '" +
                           o.dataset_name + "'");
  }
  if (o.dataset_name == "file" && o.dataset_path.empty()) {
    return InvalidArgument("--dataset-name file needs --dataset-path FILE.jsonl");
  }
  if (!o.model_path.empty() && !o.tokenizer_path.empty()) {
    return InvalidArgument("give -m or --tokenizer, not both");
  }
  if (o.tokenizer_path.empty()) o.tokenizer_path = o.model_path;
  if (o.dataset_name != "file" && o.tokenizer_path.empty()) {
    return InvalidArgument("--dataset-name " + o.dataset_name +
                           " draws random token ids: give the model's vocabulary with -m MODEL "
                           "or --tokenizer GGUF");
  }
  if (o.endpoint.empty() || o.endpoint[0] != '/') {
    return InvalidArgument("--endpoint must start with '/', got '" + o.endpoint + "'");
  }
  while (!o.base_url.empty() && o.base_url.back() == '/') o.base_url.pop_back();
  if (o.base_url.rfind("http://", 0) != 0 && o.base_url.rfind("https://", 0) != 0) {
    return InvalidArgument("--base-url must start with http:// or https://, got '" + o.base_url + "'");
  }
  TERN_RETURN_IF_ERROR(ParseInstanceUrls(o.instance_metrics, &o.metrics_urls));
  o.chat = o.endpoint.find("chat") != std::string::npos;
  if (o.prompt_format == "auto") {
    o.send_ids = !o.chat;
  } else if (o.prompt_format == "ids" || o.prompt_format == "text") {
    o.send_ids = o.prompt_format == "ids";
  } else {
    return InvalidArgument("--prompt-format must be auto, ids or text, got '" + o.prompt_format + "'");
  }
  if (o.chat && o.send_ids) return InvalidArgument("the chat endpoint takes text prompts only");
  if (o.plot.empty() && !o.save_result.empty()) {
    o.plot = o.save_result;
    if (o.plot.size() > 5 && o.plot.substr(o.plot.size() - 5) == ".json") o.plot.resize(o.plot.size() - 5);
    o.plot += ".svg";
  }
  return Status::Ok();
}

// ---- datasets -----------------------------------------------------------------

// Token ids worth drawing: normal tokens (no control, unknown or byte tokens).
std::vector<int32_t> DrawableIds(const Tokenizer& tok) {
  std::vector<int32_t> ids;
  for (int32_t id = 0; id < tok.vocab_size(); ++id) {
    if (tok.GetTokenType(id) == TokenType::kNormal) ids.push_back(id);
  }
  if (ids.empty()) {
    for (int32_t id = 0; id < tok.vocab_size(); ++id) {
      if (!tok.IsControl(id)) ids.push_back(id);
    }
  }
  return ids;
}

class PromptMaker {
 public:
  PromptMaker(const Tokenizer* tok, uint64_t seed) : tok_(tok), rng_(seed) {
    if (tok_) drawable_ = DrawableIds(*tok_);
  }
  std::vector<int32_t> RandomIds(int64_t n) {
    std::vector<int32_t> ids((size_t)n);
    std::uniform_int_distribution<size_t> pick(0, drawable_.size() - 1);
    for (int32_t& id : ids) id = drawable_[pick(rng_)];
    return ids;
  }
  int64_t Length(int64_t mean, double ratio) {
    const int64_t lo = std::max<int64_t>(1, (int64_t)std::floor(mean * (1 - ratio)));
    const int64_t hi = std::max(lo, (int64_t)std::ceil(mean * (1 + ratio)));
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng_);
  }
  BenchPrompt FromIds(std::vector<int32_t> ids, int64_t output_len) const {
    BenchPrompt p;
    p.num_tokens = (int32_t)ids.size();
    if (tok_) p.text = tok_->Decode(ids);
    p.ids = std::move(ids);
    p.output_len = (int32_t)output_len;
    return p;
  }
  std::mt19937_64& rng() { return rng_; }
  bool ok() const { return !drawable_.empty(); }

 private:
  const Tokenizer* tok_;
  std::mt19937_64 rng_;
  std::vector<int32_t> drawable_;
};

std::vector<BenchPrompt> RandomDataset(const BenchServeOptions& o, PromptMaker& mk) {
  const std::vector<int32_t> prefix = mk.RandomIds(o.random_prefix_len);
  std::vector<BenchPrompt> prompts;
  for (int64_t i = 0; i < o.num_prompts; ++i) {
    std::vector<int32_t> ids = prefix;
    const std::vector<int32_t> body = mk.RandomIds(mk.Length(o.random_input_len, o.random_range_ratio));
    ids.insert(ids.end(), body.begin(), body.end());
    prompts.push_back(mk.FromIds(std::move(ids), mk.Length(o.random_output_len, o.random_range_ratio)));
  }
  return prompts;
}

// num_prefixes shared prefixes, each followed by a fresh random suffix; the
// prompts of all prefixes interleaved in a seeded shuffle.
std::vector<BenchPrompt> PrefixRepetitionDataset(const BenchServeOptions& o, PromptMaker& mk) {
  std::vector<std::vector<int32_t>> prefixes;
  for (int64_t i = 0; i < o.num_prefixes; ++i) prefixes.push_back(mk.RandomIds(o.prefix_len));
  std::vector<BenchPrompt> prompts;
  for (int64_t i = 0; i < o.num_prompts; ++i) {
    std::vector<int32_t> ids = prefixes[(size_t)(i % o.num_prefixes)];
    const std::vector<int32_t> suffix = mk.RandomIds(o.suffix_len);
    ids.insert(ids.end(), suffix.begin(), suffix.end());
    prompts.push_back(mk.FromIds(std::move(ids), o.prefix_output_len));
  }
  std::shuffle(prompts.begin(), prompts.end(), mk.rng());
  return prompts;
}

// JSONL: {"prompt": "text" | [ids], "output_len"|"max_tokens": N} per line;
// the first --num-prompts lines (cycled when the file has fewer).
StatusOr<std::vector<BenchPrompt>> FileDataset(const BenchServeOptions& o, const Tokenizer* tok) {
  std::ifstream in(o.dataset_path);
  if (!in) return NotFound("--dataset-path " + o.dataset_path + ": cannot open");
  std::vector<BenchPrompt> lines;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = o.dataset_path + ":" + std::to_string(n);
    json j = json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object()) return InvalidArgument(where + ": not a JSON object");
    BenchPrompt p;
    p.output_len = (int32_t)o.file_output_len;
    const json* prompt = j.contains("prompt") ? &j["prompt"] : nullptr;
    if (prompt && prompt->is_string()) {
      p.text = prompt->get<std::string>();
      if (tok) p.ids = tok->Encode(p.text, false, false);
    } else if (prompt && prompt->is_array() && !prompt->empty() &&
               std::all_of(prompt->begin(), prompt->end(), [](const json& v) { return v.is_number_integer(); })) {
      p.ids = prompt->get<std::vector<int32_t>>();
      if (tok) p.text = tok->Decode(p.ids);
    } else {
      return InvalidArgument(where + ": 'prompt' must be a string or an array of token ids");
    }
    p.num_tokens = (int32_t)p.ids.size();
    for (const char* key : {"output_len", "max_tokens"}) {
      if (!j.contains(key)) continue;
      if (!j[key].is_number_integer() || j[key].get<int64_t>() < 1) {
        return InvalidArgument(where + ": '" + key + "' must be a positive integer");
      }
      p.output_len = j[key].get<int32_t>();
    }
    lines.push_back(std::move(p));
  }
  if (lines.empty()) return InvalidArgument("--dataset-path " + o.dataset_path + ": no prompts");
  std::vector<BenchPrompt> prompts;
  for (int64_t i = 0; i < o.num_prompts; ++i) prompts.push_back(lines[(size_t)(i % lines.size())]);
  return prompts;
}

StatusOr<std::vector<BenchPrompt>> BuildDataset(const BenchServeOptions& o, const Tokenizer* tok) {
  if (o.dataset_name == "file") {
    TERN_ASSIGN_OR_RETURN(std::vector<BenchPrompt> prompts, FileDataset(o, tok));
    for (const BenchPrompt& p : prompts) {
      if (o.send_ids && p.ids.empty()) {
        return InvalidArgument("--prompt-format ids with text prompts needs -m or --tokenizer");
      }
      if (!o.send_ids && p.text.empty()) {
        return InvalidArgument("text prompts from token ids need -m or --tokenizer");
      }
    }
    return prompts;
  }
  PromptMaker mk(tok, (uint64_t)o.seed);
  if (!mk.ok()) return InvalidArgument(o.tokenizer_path + ": the vocabulary has no normal tokens");
  return o.dataset_name == "random" ? RandomDataset(o, mk) : PrefixRepetitionDataset(o, mk);
}

// ---- HTTP ---------------------------------------------------------------------

struct CurlSlist {
  curl_slist* list = nullptr;
  ~CurlSlist() { curl_slist_free_all(list); }
  void Add(const std::string& h) { list = curl_slist_append(list, h.c_str()); }
};

size_t AppendBody(char* data, size_t size, size_t n, void* user) {
  static_cast<std::string*>(user)->append(data, size * n);
  return size * n;
}

StatusOr<std::string> HttpGet(const std::string& url, const std::string& api_key) {
  std::unique_ptr<CURL, void (*)(CURL*)> curl(curl_easy_init(), curl_easy_cleanup);
  std::string body;
  CurlSlist headers;
  if (!api_key.empty()) headers.Add("Authorization: Bearer " + api_key);
  curl_easy_setopt(curl.get(), CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl.get(), CURLOPT_HTTPHEADER, headers.list);
  curl_easy_setopt(curl.get(), CURLOPT_WRITEFUNCTION, AppendBody);
  curl_easy_setopt(curl.get(), CURLOPT_WRITEDATA, &body);
  curl_easy_setopt(curl.get(), CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl.get(), CURLOPT_TIMEOUT, 30L);
  const CURLcode rc = curl_easy_perform(curl.get());
  if (rc != CURLE_OK) return Unavailable("GET " + url + ": " + curl_easy_strerror(rc));
  long status = 0;
  curl_easy_getinfo(curl.get(), CURLINFO_RESPONSE_CODE, &status);
  if (status != 200) {
    return Unavailable("GET " + url + ": HTTP " + std::to_string(status) + ": " + body.substr(0, 300));
  }
  return body;
}

StatusOr<std::string> FirstModelId(const BenchServeOptions& o) {
  TERN_ASSIGN_OR_RETURN(std::string body, HttpGet(o.base_url + "/v1/models", o.api_key));
  json j = json::parse(body, nullptr, false);
  if (j.is_object() && j.contains("data") && j["data"].is_array() && !j["data"].empty() &&
      j["data"][0].is_object() && j["data"][0].contains("id") && j["data"][0]["id"].is_string()) {
    return j["data"][0]["id"].get<std::string>();
  }
  return Unavailable(o.base_url + "/v1/models: no model id in the answer (give --model-name)");
}

std::string RequestBody(const BenchServeOptions& o, const std::string& model, const BenchPrompt& p,
                        int32_t max_tokens) {
  json body;
  body["model"] = model;
  if (o.chat) {
    body["messages"] = json::array({{{"role", "user"}, {"content", p.text}}});
  } else if (o.send_ids) {
    body["prompt"] = p.ids;
  } else {
    body["prompt"] = p.text;
  }
  body["max_tokens"] = max_tokens;
  body["temperature"] = o.temperature;
  body["stream"] = true;
  body["stream_options"] = {{"include_usage", true}};
  if (o.ignore_eos) body["ignore_eos"] = true;
  return body.dump(-1, ' ', false, json::error_handler_t::replace);
}

// Reads the SSE stream of one request: a chunk with non-empty text (or chat
// delta content) is a token event, timed when its bytes arrive.
class StreamReader {
 public:
  StreamReader(Clock::time_point sent, bool chat) : sent_(sent), chat_(chat) {}

  static size_t Write(char* data, size_t size, size_t n, void* user) {
    static_cast<StreamReader*>(user)->Feed(std::string_view(data, size * n));
    return size * n;
  }
  void Feed(std::string_view bytes) {
    const Clock::time_point now = Clock::now();
    raw_.append(bytes);
    size_t end;
    while ((end = raw_.find('\n', pos_)) != std::string::npos) {
      std::string_view line(raw_.data() + pos_, end - pos_);
      pos_ = end + 1;
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      if (line.rfind("data:", 0) == 0) Event(line.substr(5), now);
    }
  }
  void Event(std::string_view data, Clock::time_point now) {
    while (!data.empty() && data.front() == ' ') data.remove_prefix(1);
    if (data == "[DONE]") return;
    json j = json::parse(data, nullptr, false);
    if (!j.is_object()) return;
    if (j.contains("error")) {
      error_ = "stream error: " + j["error"].dump();
      return;
    }
    if (j.contains("usage") && j["usage"].is_object()) {
      const json& u = j["usage"];
      if (u.contains("prompt_tokens") && u["prompt_tokens"].is_number_integer()) {
        usage_prompt_ = u["prompt_tokens"].get<int32_t>();
      }
      if (u.contains("completion_tokens") && u["completion_tokens"].is_number_integer()) {
        usage_completion_ = u["completion_tokens"].get<int32_t>();
      }
    }
    if (!j.contains("choices") || !j["choices"].is_array() || j["choices"].empty()) return;
    const json& c = j["choices"][0];
    const json* text = nullptr;
    if (chat_) {
      if (c.contains("delta") && c["delta"].is_object()) {
        const json& d = c["delta"];
        if (d.contains("content") && d["content"].is_string()) text = &d["content"];
        else if (d.contains("reasoning_content") && d["reasoning_content"].is_string()) text = &d["reasoning_content"];
      }
    } else if (c.contains("text") && c["text"].is_string()) {
      text = &c["text"];
    }
    if (text == nullptr || text->get_ref<const std::string&>().empty()) return;
    ++num_chunks_;
    const double t = std::chrono::duration<double>(now - sent_).count();
    if (num_chunks_ == 1) ttft_s_ = t;
    else itl_s_.push_back(t - last_s_);
    last_s_ = t;
  }

  const std::string& raw() const { return raw_; }
  const std::string& error() const { return error_; }
  int num_chunks() const { return num_chunks_; }
  double ttft_s() const { return ttft_s_; }
  std::vector<double>& itl_s() { return itl_s_; }
  int32_t usage_prompt() const { return usage_prompt_; }
  int32_t usage_completion() const { return usage_completion_; }

 private:
  Clock::time_point sent_;
  bool chat_;
  std::string raw_;
  size_t pos_ = 0;
  std::string error_;
  int num_chunks_ = 0;
  double ttft_s_ = 0, last_s_ = 0;
  std::vector<double> itl_s_;
  int32_t usage_prompt_ = -1, usage_completion_ = -1;
};

ServeRequestResult SendRequest(const BenchServeOptions& o, const std::string& model,
                               const BenchPrompt& p, int32_t max_tokens, Clock::time_point t0) {
  ServeRequestResult r;
  const std::string url = o.base_url + o.endpoint;
  const std::string body = RequestBody(o, model, p, max_tokens);
  std::unique_ptr<CURL, void (*)(CURL*)> curl(curl_easy_init(), curl_easy_cleanup);
  CurlSlist headers;
  headers.Add("Content-Type: application/json");
  headers.Add("Accept: text/event-stream");
  if (!o.api_key.empty()) headers.Add("Authorization: Bearer " + o.api_key);
  const Clock::time_point sent = Clock::now();
  StreamReader reader(sent, o.chat);
  curl_easy_setopt(curl.get(), CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl.get(), CURLOPT_HTTPHEADER, headers.list);
  curl_easy_setopt(curl.get(), CURLOPT_POSTFIELDS, body.c_str());
  curl_easy_setopt(curl.get(), CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body.size());
  curl_easy_setopt(curl.get(), CURLOPT_WRITEFUNCTION, StreamReader::Write);
  curl_easy_setopt(curl.get(), CURLOPT_WRITEDATA, &reader);
  curl_easy_setopt(curl.get(), CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl.get(), CURLOPT_TCP_NODELAY, 1L);
  curl_easy_setopt(curl.get(), CURLOPT_CONNECTTIMEOUT, 30L);
  if (o.request_timeout_s > 0) {
    curl_easy_setopt(curl.get(), CURLOPT_TIMEOUT_MS, (long)(o.request_timeout_s * 1e3));
  }
  const CURLcode rc = curl_easy_perform(curl.get());
  r.start_s = std::chrono::duration<double>(sent - t0).count();
  r.e2el_s = std::chrono::duration<double>(Clock::now() - sent).count();
  long status = 0;
  curl_easy_getinfo(curl.get(), CURLINFO_RESPONSE_CODE, &status);
  if (rc != CURLE_OK) {
    r.error = std::string("curl: ") + curl_easy_strerror(rc);
  } else if (status != 200) {
    r.error = "HTTP " + std::to_string(status) + ": " + reader.raw().substr(0, 300);
  } else if (!reader.error().empty()) {
    r.error = reader.error();
  } else if (reader.num_chunks() == 0) {
    r.error = "no streamed text in the response";
  }
  r.success = r.error.empty();
  r.ttft_s = reader.ttft_s();
  r.itl_s = std::move(reader.itl_s());
  r.prompt_tokens = reader.usage_prompt() >= 0 ? reader.usage_prompt() : p.num_tokens;
  r.output_tokens = reader.usage_completion() >= 0 ? reader.usage_completion() : reader.num_chunks();
  return r;
}

// ---- the run ------------------------------------------------------------------

// Seconds after the start at which each request is sent: 0 for rate inf,
// else a Poisson process (exponential gaps).
std::vector<double> ArrivalTimes(size_t n, double rate, uint64_t seed) {
  std::vector<double> t(n, 0);
  if (std::isinf(rate)) return t;
  std::mt19937_64 rng(seed ^ 0x5eedULL);
  std::exponential_distribution<double> gap(rate);
  double now = 0;
  for (double& x : t) {
    x = now;
    now += gap(rng);
  }
  return t;
}

class Progress {
 public:
  explicit Progress(size_t total) : total_(total) {}
  void Done(bool ok) {
    std::lock_guard<std::mutex> lock(mu_);
    ++done_;
    failed_ += !ok;
    const Clock::time_point now = Clock::now();
    if (done_ == total_ || now - last_ > std::chrono::milliseconds(500)) {
      std::fprintf(stderr, "\rtern bench serve: %zu/%zu requests done, %zu failed, %.1f s", done_,
                   total_, failed_, std::chrono::duration<double>(now - start_).count());
      if (done_ == total_) std::fputc('\n', stderr);
      last_ = now;
    }
  }

 private:
  std::mutex mu_;
  size_t total_, done_ = 0, failed_ = 0;
  Clock::time_point start_ = Clock::now(), last_{};
};

std::vector<ServeRequestResult> RunLoad(const BenchServeOptions& o, const std::string& model,
                                        const std::vector<BenchPrompt>& prompts,
                                        double* duration_s) {
  const std::vector<double> arrivals = ArrivalTimes(prompts.size(), o.rate, (uint64_t)o.seed);
  const std::ptrdiff_t slots = o.max_concurrency > 0 ? o.max_concurrency : (std::ptrdiff_t)prompts.size();
  std::counting_semaphore<> free_slots(slots);
  std::vector<ServeRequestResult> results(prompts.size());
  std::vector<std::thread> threads;
  Progress progress(prompts.size());
  const Clock::time_point t0 = Clock::now();
  for (size_t i = 0; i < prompts.size(); ++i) {
    std::this_thread::sleep_until(t0 + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(arrivals[i])));
    free_slots.acquire();
    threads.emplace_back([&, i] {
      results[i] = SendRequest(o, model, prompts[i], prompts[i].output_len, t0);
      free_slots.release();
      progress.Done(results[i].success);
    });
  }
  for (std::thread& t : threads) t.join();
  *duration_s = std::chrono::duration<double>(Clock::now() - t0).count();
  return results;
}

// Every instance's counters now; fails naming the first that cannot be read.
StatusOr<std::vector<InstanceCounters>> ReadInstances(const BenchServeOptions& o) {
  std::vector<InstanceCounters> all;
  for (const std::string& url : o.metrics_urls) {
    TERN_ASSIGN_OR_RETURN(std::string text, HttpGet(url, o.api_key));
    InstanceCounters c;
    if (!ParseInstanceCounters(text, &c)) {
      return InvalidArgument("--instance-metrics: " + url +
                             " has no request_success / prefix_cache_* counters");
    }
    all.push_back(c);
  }
  return all;
}

bool WriteText(const std::string& path, const std::string& text) {
  return WriteFileAtomically(path, text).ok();
}

int Fail(const std::string& message) {
  std::fprintf(stderr, "tern bench serve: %s\n", message.c_str());
  return 1;
}

void AddFlags(ArgParser& p, BenchServeOptions& o) {
  p.AddString("--base-url", "URL", &o.base_url, "server to load (default http://127.0.0.1:8080)");
  p.AddString("--endpoint", "PATH", &o.endpoint,
              "API path (default /v1/completions; /v1/chat/completions sends text as one user "
              "message)");
  p.AddString("--model-name", "NAME", &o.model_name,
              "the request's \"model\" (default: the first id of GET /v1/models)");
  AddModelFlag(p, &o.model_path,
               "GGUF model whose vocabulary draws and detokenizes the random prompts (required "
               "for the random and prefix-repetition datasets, or --tokenizer)");
  p.AddString("--tokenizer", "GGUF", &o.tokenizer_path, "the same as -m (a GGUF with the vocabulary)");
  p.AddString("--api-key", "KEY", &o.api_key, "send 'Authorization: Bearer KEY' (default: none)");
  p.AddString("--dataset-name", "NAME", &o.dataset_name,
              "random, prefix-repetition or file (default random)");
  p.AddInt("--num-prompts", "N", &o.num_prompts, "requests to send (default 1000)");
  p.AddInt("--random-input-len", "N", &o.random_input_len, "random: prompt tokens (default 1024)");
  p.AddInt("--random-output-len", "N", &o.random_output_len, "random: max_tokens (default 128)");
  p.AddDouble("--random-range-ratio", "F", &o.random_range_ratio,
              "random: lengths uniform in [len x (1-F), len x (1+F)] (default 0)");
  p.AddInt("--random-prefix-len", "N", &o.random_prefix_len,
           "random: tokens of one prefix shared by every prompt, before the random part (default 0)");
  p.AddInt("--prefix-repetition-prefix-len", "N", &o.prefix_len,
           "prefix-repetition: tokens of each shared prefix (default 256)");
  p.AddInt("--prefix-repetition-suffix-len", "N", &o.suffix_len,
           "prefix-repetition: unique random tokens after the prefix (default 256)");
  p.AddInt("--prefix-repetition-num-prefixes", "N", &o.num_prefixes,
           "prefix-repetition: distinct prefixes, prompts spread evenly over them (default 10)");
  p.AddInt("--prefix-repetition-output-len", "N", &o.prefix_output_len,
           "prefix-repetition: max_tokens (default 128)");
  p.AddString("--dataset-path", "FILE", &o.dataset_path,
              "file: JSONL, one {\"prompt\": \"text\" or [ids], \"output_len\": N} per line");
  p.AddInt("--file-output-len", "N", &o.file_output_len,
           "file: max_tokens of lines without output_len (default 128)");
  p.AddString("--prompt-format", "FMT", &o.prompt_format,
              "ids (token-id arrays, exact lengths), text (detokenized) or auto: ids for "
              "completions, text for chat (default auto)");
  p.AddString("--request-rate", "R", &o.request_rate,
              "requests per second, Poisson arrivals; inf sends all at once (default inf)");
  p.AddInt("--max-concurrency", "N", &o.max_concurrency,
           "most requests in flight (default 0 = no limit)");
  p.AddFlag("--ignore-eos", &o.ignore_eos, "ask the server to ignore EOS (exact output lengths)");
  p.AddDouble("--temperature", "F", &o.temperature, "sampling temperature (default 0 = greedy)");
  p.AddInt("--seed", "N", &o.seed, "seed of the prompts and the arrival times (default 0)");
  p.AddList("--goodput", "NAME:MS", &o.goodput,
            "goodput bound, e.g. --goodput ttft:2000 tpot:150 (ttft, tpot, e2el in ms; "
            "default: none, goodput = all successful requests)");
  p.AddString("--save-result", "FILE", &o.save_result, "write the result as JSON (default: none)");
  p.AddString("--plot", "FILE", &o.plot,
              "write an SVG of the latency distributions and TTFT over time (default: "
              "--save-result's name with .svg, none without it)");
  p.AddString("--label", "TEXT", &o.label, "name of this run in the result and plot (default: the URL)");
  p.AddDouble("--request-timeout", "S", &o.request_timeout_s,
              "fail a request after S seconds (default 0 = no limit)");
  p.AddString("--instance-metrics", "URL,...", &o.instance_metrics,
              "instances behind the load balancer at --base-url: read each one's /metrics before "
              "and after the run, report every instance's requests and prefix-cache hit rate, the "
              "busiest one over the mean, and the hit rate of all (default: none)");
  p.AddFlag("--skip-test-request", &o.skip_test_request,
            "do not send the first prompt once before the run to check the server (default: send it)");
}

}  // namespace

int RunBenchServe(int argc, char** argv) {
  BenchServeOptions o;
  std::vector<std::string> positional;
  ArgParser p("bench serve -m MODEL [--base-url URL] [--dataset-name NAME] [--num-prompts N] "
              "[--request-rate R] [--max-concurrency N] [--save-result FILE.json]",
              "Load generator for an OpenAI-compatible server (tern serve, llama-server, vLLM), "
              "after `vllm bench serve`: streams every request and reports request and token "
              "throughput, TTFT, TPOT, ITL and end-to-end latency (mean, median, p90, p99, max), "
              "goodput under --goodput bounds and failures; optionally a JSON result and an SVG "
              "plot.");
  AddFlags(p, o);
  p.SetPositional("NAME:MS", &positional, "more --goodput bounds (as vLLM spells them)");
  p.AddCheck([&] { return Resolve(o, positional); });
  if (int rc = ParseOrExit(p, argc, argv, "bench serve"); rc >= 0) return rc;

  std::unique_ptr<gguf::GgufFile> file;
  std::unique_ptr<Tokenizer> tok;
  if (!o.tokenizer_path.empty()) {
    StatusOr<std::unique_ptr<gguf::GgufFile>> f = gguf::GgufFile::Open(o.tokenizer_path);
    if (!f.ok()) return Fail(f.status().message());
    file = std::move(*f);
    StatusOr<std::unique_ptr<Tokenizer>> t = Tokenizer::FromGguf(*file);
    if (!t.ok()) return Fail(t.status().message());
    tok = std::move(*t);
  }
  StatusOr<std::vector<BenchPrompt>> prompts = BuildDataset(o, tok.get());
  if (!prompts.ok()) return Fail(prompts.status().message());

  curl_global_init(CURL_GLOBAL_DEFAULT);
  std::string model = o.model_name;
  if (model.empty()) {
    StatusOr<std::string> id = FirstModelId(o);
    if (!id.ok()) return Fail(id.status().message());
    model = *id;
  }
  std::fprintf(stderr, "tern bench serve: %zu prompts (%s) -> %s%s, model '%s', rate %s, "
               "max concurrency %s\n", prompts->size(), o.dataset_name.c_str(), o.base_url.c_str(),
               o.endpoint.c_str(), model.c_str(), o.request_rate.c_str(),
               o.max_concurrency > 0 ? std::to_string(o.max_concurrency).c_str() : "unlimited");
  if (!o.skip_test_request) {
    const BenchPrompt& first = prompts->front();
    ServeRequestResult test = SendRequest(o, model, first, std::min(first.output_len, 4), Clock::now());
    if (!test.success) return Fail("test request failed: " + test.error);
  }

  StatusOr<std::vector<InstanceCounters>> before = ReadInstances(o);
  if (!before.ok()) return Fail(before.status().message());

  double duration_s = 0;
  std::vector<ServeRequestResult> results = RunLoad(o, model, *prompts, &duration_s);
  const ServeBenchSummary summary = SummarizeServeBench(results, duration_s, o.slo);
  std::fputs(FormatServeSummary(summary, o.slo).c_str(), stdout);
  StatusOr<std::vector<InstanceCounters>> after = ReadInstances(o);
  InstanceSpread spread;
  if (!o.metrics_urls.empty() && after.ok()) {
    spread = SummarizeInstances(o.metrics_urls, *before, *after, duration_s);
    std::fputs(FormatInstanceSpread(spread).c_str(), stdout);
  }
  for (const ServeRequestResult& r : results) {
    if (!r.success) {
      std::fprintf(stderr, "tern bench serve: first failure: %s\n", r.error.c_str());
      break;
    }
  }

  const std::string label = o.label.empty() ? o.base_url + o.endpoint : o.label;
  if (!o.save_result.empty()) {
    json j = ServeSummaryJson(summary, results);
    j["label"] = label;
    j["base_url"] = o.base_url;
    j["endpoint"] = o.endpoint;
    j["model_id"] = model;
    j["dataset_name"] = o.dataset_name;
    j["num_prompts"] = prompts->size();
    j["request_rate"] = std::isinf(o.rate) ? json("inf") : json(o.rate);
    j["max_concurrency"] = o.max_concurrency > 0 ? json(o.max_concurrency) : json(nullptr);
    j["ignore_eos"] = o.ignore_eos;
    j["seed"] = o.seed;
    j["goodput_slo_ms"] = {{"ttft", o.slo.ttft_ms}, {"tpot", o.slo.tpot_ms}, {"e2el", o.slo.e2el_ms}};
    if (!o.metrics_urls.empty() && after.ok()) j.update(InstanceSpreadJson(spread));
    if (!WriteText(o.save_result, j.dump(2) + "\n")) return Fail("cannot write " + o.save_result);
    std::fprintf(stderr, "tern bench serve: wrote %s\n", o.save_result.c_str());
  }
  if (!o.plot.empty()) {
    const std::string title = label + " - " + o.dataset_name + ", " +
                              std::to_string(prompts->size()) + " prompts, rate " +
                              o.request_rate + ", max concurrency " +
                              (o.max_concurrency > 0 ? std::to_string(o.max_concurrency) : "none");
    if (!WriteText(o.plot, ServeLatencySvg(summary, results, title))) {
      return Fail("cannot write " + o.plot);
    }
    std::fprintf(stderr, "tern bench serve: wrote %s\n", o.plot.c_str());
  }
  curl_global_cleanup();
  if (!after.ok()) return Fail("after the run: " + after.status().message());
  if (summary.failed > 0) {
    return Fail(std::to_string(summary.failed) + " of " + std::to_string(results.size()) +
                " requests failed");
  }
  return 0;
}

}  // namespace tern
