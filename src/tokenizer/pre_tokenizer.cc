#include "tokenizer/pre_tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <initializer_list>

#include "tokenizer/unicode.h"

namespace tern {
namespace {

// GPT-2's expression.
constexpr const char* kGpt2 =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)";
// Llama-3's expression with the case-insensitive contractions spelled out.
constexpr const char* kLlama3 =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
    "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
// Qwen2's: as Llama-3 but single digits.
constexpr const char* kQwen2 =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
    "\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr const char* kTekken =
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+|"
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*|"
    "\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr const char* kGpt4o =
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+"
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|"
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*"
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|"
    "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
// DeepSeek LLM: cased letters (as listed in its tokenizer), ASCII and
// full-width punctuation, CJK and Hangul runs, numbers.
constexpr const char* kDeepseekLetters =
    "\\s?[A-Za-z\\x{B5}\\x{C0}-\\x{D6}\\x{D8}-\\x{F6}\\x{F8}-\\x{1BA}\\x{1BC}-\\x{1BF}"
    "\\x{1C4}-\\x{293}\\x{295}-\\x{2AF}\\x{370}-\\x{373}\\x{376}\\x{377}\\x{37B}-\\x{37D}"
    "\\x{37F}\\x{386}\\x{388}-\\x{38A}\\x{38C}\\x{38E}-\\x{3A1}\\x{3A3}-\\x{3F5}"
    "\\x{3F7}-\\x{481}\\x{48A}-\\x{52F}\\x{531}-\\x{556}\\x{10A0}-\\x{10C5}\\x{13A0}-\\x{13F5}"
    "\\x{13F8}-\\x{13FD}\\x{1C90}-\\x{1CBA}\\x{1CBD}-\\x{1CBF}\\x{1D00}-\\x{1D2B}"
    "\\x{1D6B}-\\x{1D77}\\x{1D79}-\\x{1D9A}\\x{1E00}-\\x{1F15}\\x{1F18}-\\x{1F1D}"
    "\\x{1F20}-\\x{1F45}\\x{1F48}-\\x{1F4D}\\x{1F50}-\\x{1F57}\\x{1F59}\\x{1F5B}\\x{1F5D}"
    "\\x{1F5F}-\\x{1F7D}\\x{1F80}-\\x{1FB4}\\x{1FB6}-\\x{1FBC}\\x{1FBE}\\x{1FC2}-\\x{1FC4}"
    "\\x{1FC6}-\\x{1FCC}\\x{1FD0}-\\x{1FD3}\\x{1FD6}-\\x{1FDB}\\x{1FE0}-\\x{1FEC}"
    "\\x{1FF2}-\\x{1FF4}\\x{1FF6}-\\x{1FFC}\\x{2102}\\x{2107}\\x{210A}-\\x{2113}\\x{2115}"
    "\\x{2119}-\\x{211D}\\x{2124}\\x{2126}\\x{2128}\\x{212A}-\\x{212D}\\x{212F}-\\x{2134}"
    "\\x{2139}\\x{213C}-\\x{213F}\\x{2145}-\\x{2149}\\x{214E}\\x{2183}\\x{2184}"
    "\\x{2C00}-\\x{2C7B}\\x{2C7E}-\\x{2CE4}\\x{2CEB}-\\x{2CEE}\\x{2CF2}\\x{2CF3}"
    "\\x{A640}-\\x{A66D}\\x{A680}-\\x{A69B}\\x{A722}-\\x{A76F}\\x{A771}-\\x{A787}"
    "\\x{A78B}-\\x{A78E}\\x{AB70}-\\x{ABBF}\\x{FB00}-\\x{FB06}\\x{FB13}-\\x{FB17}"
    "\\x{FF21}-\\x{FF3A}\\x{FF41}-\\x{FF5A}\\x{10400}-\\x{1044F}\\x{104B0}-\\x{104D3}"
    "\\x{104D8}-\\x{104FB}\\x{10C80}-\\x{10CB2}\\x{10CC0}-\\x{10CF2}\\x{118A0}-\\x{118DF}"
    "\\x{1E900}-\\x{1E943}]+";
constexpr const char* kDeepseekPunct =
    "\\s?[!-/:-~\\x{FF01}-\\x{FF0F}\\x{FF1A}-\\x{FF5E}\\x{2018}-\\x{201F}\\x{3000}-\\x{3002}]+";
constexpr const char* kCjkHangul = "[\\x{4E00}-\\x{9FA5}\\x{800}-\\x{4E00}\\x{AC00}-\\x{D7FF}]+";
constexpr const char* kBloom = " ?[^(\\s|.,!?\\x{2026}\\x{3002}\\x{FF0C}\\x{3001}\\x{964}\\x{6D4}\\x{60C})]+";

bool IsOneOf(std::string_view s, std::initializer_list<std::string_view> names) {
  for (std::string_view n : names) {
    if (s == n) return true;
  }
  return false;
}

}  // namespace

struct PreTokenizer::Regex {
  pcre2_code* code = nullptr;
  ~Regex() { pcre2_code_free(code); }
};

StatusOr<std::vector<std::string>> PreTokenizer::PatternsFor(std::string_view pre) {
  if (pre.empty() || pre == "default") {
    return std::vector<std::string>{"[\\p{P}\\$\\+<=>\\^~\\|]+", kGpt2, "\\p{N}+",
                                    "[0-9][0-9][0-9]"};
  }
  if (IsOneOf(pre, {"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral",
                    "midm-2.0", "lfm2", "dbrx", "smaug-bpe", "chatglm-bpe"})) {
    return std::vector<std::string>{kLlama3};
  }
  if (IsOneOf(pre, {"qwen2", "deepseek-r1-qwen", "megrez", "stablelm2", "hunyuan"})) {
    return std::vector<std::string>{kQwen2};
  }
  if (pre == "deepseek-llm") {
    return std::vector<std::string>{"[\r\n]", kDeepseekLetters, kDeepseekPunct, "\\s+$",
                                    kCjkHangul, "\\p{N}+"};
  }
  if (pre == "deepseek-coder") {
    return std::vector<std::string>{"[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", kCjkHangul,
                                    "\\p{N}"};
  }
  if (IsOneOf(pre, {"deepseek-v3", "hunyuan-dense"})) {
    return std::vector<std::string>{
        "\\p{N}{1,3}", "[\\x{4E00}-\\x{9FA5}\\x{3040}-\\x{309F}\\x{30A0}-\\x{30FF}]+",
        "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?"
        "[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"};
  }
  if (pre == "falcon") {
    return std::vector<std::string>{"[\\p{P}\\$\\+<=>\\^~\\|`]+", kGpt2, "[0-9][0-9][0-9]"};
  }
  if (IsOneOf(pre, {"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone",
                    "minerva-7b"})) {
    return std::vector<std::string>{"\\p{N}", kGpt2};
  }
  if (IsOneOf(pre, {"gpt-2", "gpt2", "mpt", "olmo", "jais", "trillion", "phi-2", "jina-es",
                    "jina-de", "gigachat", "jina-v1-en", "jina-v2-es", "jina-v2-de",
                    "jina-v2-code", "roberta-bpe"})) {
    return std::vector<std::string>{kGpt2};
  }
  if (IsOneOf(pre, {"poro-chat", "bloom", "gpt3-finnish"})) {
    return std::vector<std::string>{kBloom};
  }
  if (pre == "viking") return std::vector<std::string>{kBloom, "\\p{N}"};
  if (pre == "tekken") return std::vector<std::string>{kTekken};
  if (IsOneOf(pre, {"gpt-4o", "llama4"})) return std::vector<std::string>{kGpt4o};
  return Unimplemented("tokenizer.ggml.pre = '" + std::string(pre) +
                       "' is not a known pre-tokenizer");
}

StatusOr<std::unique_ptr<PreTokenizer>> PreTokenizer::Create(std::string_view pre) {
  TERN_ASSIGN_OR_RETURN(std::vector<std::string> patterns, PatternsFor(pre));
  return FromPatterns(patterns);
}

StatusOr<std::unique_ptr<PreTokenizer>> PreTokenizer::FromPatterns(
    const std::vector<std::string>& patterns) {
  std::unique_ptr<PreTokenizer> pt(new PreTokenizer());
  for (const std::string& pattern : patterns) {
    int error_code = 0;
    PCRE2_SIZE error_offset = 0;
    auto regex = std::make_unique<Regex>();
    regex->code = pcre2_compile((PCRE2_SPTR)pattern.data(), pattern.size(),
                                PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY, &error_code,
                                &error_offset, nullptr);
    if (regex->code == nullptr) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(error_code, message, sizeof(message));
      return InvalidArgument("pre-tokenizer expression '" + pattern + "' at offset " +
                             std::to_string(error_offset) + ": " + (const char*)message);
    }
    // JIT is an optimisation; interpretation is the fallback.
    (void)pcre2_jit_compile(regex->code, PCRE2_JIT_COMPLETE);
    pt->regexes_.push_back(std::move(regex));
  }
  return pt;
}

PreTokenizer::~PreTokenizer() = default;

std::vector<std::string> PreTokenizer::SplitRaw(std::string_view text) const {
  const std::string clean = SanitizeUtf8(text);
  // Pieces as [begin, end) byte offsets into clean.
  std::vector<std::pair<size_t, size_t>> pieces;
  if (!clean.empty()) pieces.push_back({0, clean.size()});
  for (const auto& regex : regexes_) {
    pcre2_match_data* md = pcre2_match_data_create_from_pattern(regex->code, nullptr);
    std::vector<std::pair<size_t, size_t>> next;
    next.reserve(pieces.size() * 2);
    for (const auto& [begin, end] : pieces) {
      const PCRE2_SPTR subject = (PCRE2_SPTR)clean.data() + begin;
      const size_t length = end - begin;
      size_t pos = 0;       // search start
      size_t emitted = 0;   // end of the last emitted piece
      while (pos <= length) {
        const int rc = pcre2_match(regex->code, subject, length, pos, PCRE2_NO_UTF_CHECK, md,
                                   nullptr);
        if (rc < 0) break;
        const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
        const size_t m_begin = ov[0], m_end = ov[1];
        if (m_end == m_begin) {
          // Empty match: move on by one character.
          if (m_begin >= length) break;
          pos = m_begin + Utf8SequenceLength((uint8_t)subject[m_begin]);
          continue;
        }
        if (m_begin > emitted) next.push_back({begin + emitted, begin + m_begin});
        next.push_back({begin + m_begin, begin + m_end});
        emitted = pos = m_end;
      }
      if (emitted < length) next.push_back({begin + emitted, end});
    }
    pcre2_match_data_free(md);
    pieces = std::move(next);
  }
  std::vector<std::string> words;
  words.reserve(pieces.size());
  for (const auto& [begin, end] : pieces) words.emplace_back(clean.substr(begin, end - begin));
  return words;
}

std::vector<std::string> PreTokenizer::Split(std::string_view text) const {
  std::vector<std::string> words = SplitRaw(text);
  for (std::string& w : words) w = ByteLevelEncode(w);
  return words;
}

}  // namespace tern
