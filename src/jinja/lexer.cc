#include "jinja/lexer.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>

#include "base/utf8.h"

namespace tern {
namespace {

struct Piece {
  enum class Kind { kText, kExpression, kStatement, kComment };
  Kind kind = Kind::kText;
  std::string text;
  std::vector<Token> tokens;
  char left_mod = 0;   // '-' or '+' right after the opening delimiter
  char right_mod = 0;  // '-' or '+' right before the closing delimiter
  size_t offset = 0;
  bool verbatim = false;  // raw block content: no trim_blocks after `{% raw %}`
  bool skip = false;      // raw/endraw tags: shape whitespace, not parsed
};

class LineIndex {
 public:
  explicit LineIndex(std::string_view src) {
    starts_.push_back(0);
    for (size_t i = 0; i < src.size(); ++i) {
      if (src[i] == '\n') starts_.push_back(i + 1);
    }
  }
  void Locate(size_t offset, int* line, int* column) const {
    auto it = std::upper_bound(starts_.begin(), starts_.end(), offset);
    size_t index = static_cast<size_t>(it - starts_.begin()) - 1;
    *line = static_cast<int>(index + 1);
    *column = static_cast<int>(offset - starts_[index] + 1);
  }

 private:
  std::vector<size_t> starts_;
};

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

class TagLexer {
 public:
  TagLexer(std::string_view src, const LineIndex& lines) : src_(src), lines_(lines) {}

  Status Error(size_t offset, const std::string& message) const {
    int line = 0, column = 0;
    lines_.Locate(offset, &line, &column);
    return InvalidArgument("template line " + std::to_string(line) + ", column " +
                           std::to_string(column) + ": " + message);
  }

  // Tokenizes a tag body starting at `pos` (after the opening delimiter and
  // modifier) up to its closing delimiter; sets *end past the delimiter.
  Status LexTag(Piece::Kind kind, size_t open_offset, size_t pos, Piece* piece, size_t* end) {
    int depth = 0;
    const size_t n = src_.size();
    while (true) {
      while (pos < n && IsSpace(src_[pos])) ++pos;
      if (pos >= n) {
        return Error(open_offset, kind == Piece::Kind::kExpression
                                      ? "unclosed '{{' (missing '}}')"
                                      : "unclosed '{%' (missing '%}')");
      }
      std::string_view rest = src_.substr(pos);
      if (depth == 0) {
        const char* close = kind == Piece::Kind::kExpression ? "}}" : "%}";
        if (rest.size() >= 3 && (rest[0] == '-' || rest[0] == '+') && rest.substr(1, 2) == close) {
          piece->right_mod = rest[0];
          *end = pos + 3;
          return Status::Ok();
        }
        if (rest.substr(0, 2) == close) {
          *end = pos + 2;
          return Status::Ok();
        }
      }
      Token token;
      lines_.Locate(pos, &token.line, &token.column);
      char c = src_[pos];
      if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        size_t start = pos;
        while (pos < n && (std::isalnum(static_cast<unsigned char>(src_[pos])) || src_[pos] == '_')) ++pos;
        token.kind = Token::Kind::kName;
        token.text = std::string(src_.substr(start, pos - start));
      } else if (std::isdigit(static_cast<unsigned char>(c))) {
        TERN_RETURN_IF_ERROR(LexNumber(&pos, &token));
      } else if (c == '\'' || c == '"') {
        TERN_RETURN_IF_ERROR(LexString(&pos, &token));
      } else {
        static const char* kOps[] = {"**", "//", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%",
                                     "~",  "<",  ">",  "(",  ")",  "[",  "]", "{", "}", ",", ".",
                                     ":",  "|",  "=",  ";"};
        std::string_view op;
        for (const char* candidate : kOps) {
          if (rest.substr(0, std::char_traits<char>::length(candidate)) == candidate) {
            op = candidate;
            break;
          }
        }
        if (op.empty()) {
          return Error(pos, std::string("unexpected character '") + c + "'");
        }
        if (op == "(" || op == "[" || op == "{") ++depth;
        if ((op == ")" || op == "]" || op == "}") && depth > 0) --depth;
        token.kind = Token::Kind::kOp;
        token.text = std::string(op);
        pos += op.size();
      }
      piece->tokens.push_back(std::move(token));
    }
  }

 private:
  Status LexNumber(size_t* pos, Token* token) {
    const size_t n = src_.size();
    size_t start = *pos;
    std::string digits;
    bool is_float = false;
    auto take_digits = [&]() {
      while (*pos < n && (std::isdigit(static_cast<unsigned char>(src_[*pos])) || src_[*pos] == '_')) {
        if (src_[*pos] != '_') digits += src_[*pos];
        ++*pos;
      }
    };
    take_digits();
    if (*pos + 1 < n && src_[*pos] == '.' && std::isdigit(static_cast<unsigned char>(src_[*pos + 1]))) {
      is_float = true;
      digits += '.';
      ++*pos;
      take_digits();
    }
    if (*pos < n && (src_[*pos] == 'e' || src_[*pos] == 'E')) {
      size_t p = *pos + 1;
      if (p < n && (src_[p] == '+' || src_[p] == '-')) ++p;
      if (p < n && std::isdigit(static_cast<unsigned char>(src_[p]))) {
        is_float = true;
        digits += 'e';
        digits.append(src_.substr(*pos + 1, p - *pos - 1));
        *pos = p;
        take_digits();
      }
    }
    if (is_float) {
      token->kind = Token::Kind::kFloat;
      token->float_value = std::strtod(digits.c_str(), nullptr);
    } else {
      token->kind = Token::Kind::kInt;
      errno = 0;
      token->int_value = std::strtoll(digits.c_str(), nullptr, 10);
      if (errno == ERANGE) return Error(start, "integer literal out of range");
    }
    token->text = std::string(src_.substr(start, *pos - start));
    return Status::Ok();
  }

  Status LexString(size_t* pos, Token* token) {
    const size_t n = src_.size();
    size_t start = *pos;
    char quote = src_[*pos];
    ++*pos;
    std::string out;
    while (true) {
      if (*pos >= n) return Error(start, "unterminated string literal");
      char c = src_[*pos];
      if (c == quote) {
        ++*pos;
        break;
      }
      if (c != '\\') {
        out += c;
        ++*pos;
        continue;
      }
      if (*pos + 1 >= n) return Error(start, "unterminated string literal");
      char e = src_[*pos + 1];
      *pos += 2;
      switch (e) {
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'v': out += '\v'; break;
        case 'a': out += '\a'; break;
        case '0': out += '\0'; break;
        case '\\': out += '\\'; break;
        case '\'': out += '\''; break;
        case '"': out += '"'; break;
        case '\n': break;  // line continuation
        case 'x':
        case 'u':
        case 'U': {
          size_t len = e == 'x' ? 2 : (e == 'u' ? 4 : 8);
          if (*pos + len > n) return Error(start, "truncated \\" + std::string(1, e) + " escape");
          uint32_t cp = 0;
          for (size_t i = 0; i < len; ++i) {
            char h = src_[*pos + i];
            if (!std::isxdigit(static_cast<unsigned char>(h))) {
              return Error(start, "bad \\" + std::string(1, e) + " escape");
            }
            cp = cp * 16 + static_cast<uint32_t>(std::isdigit(static_cast<unsigned char>(h))
                                                     ? h - '0'
                                                     : std::tolower(h) - 'a' + 10);
          }
          if (cp > 0x10FFFF) return Error(start, "escape out of Unicode range");
          *pos += len;
          AppendUtf8(cp, &out);
          break;
        }
        default:  // unknown escapes keep the backslash, as Python does
          out += '\\';
          out += e;
      }
    }
    token->kind = Token::Kind::kString;
    token->text = std::move(out);
    return Status::Ok();
  }

  std::string_view src_;
  const LineIndex& lines_;
};

// Finds `{% endraw %}` (with optional '-' modifiers) at or after `from`.
bool FindEndRaw(std::string_view src, size_t from, size_t* tag_start, size_t* tag_end,
                char* left_mod, char* right_mod) {
  size_t q = from;
  while ((q = src.find("{%", q)) != std::string_view::npos) {
    size_t r = q + 2;
    char lm = 0;
    if (r < src.size() && (src[r] == '-' || src[r] == '+')) lm = src[r++];
    while (r < src.size() && IsSpace(src[r])) ++r;
    if (src.substr(r, 6) == "endraw") {
      r += 6;
      while (r < src.size() && IsSpace(src[r])) ++r;
      char rm = 0;
      if (r < src.size() && (src[r] == '-' || src[r] == '+')) rm = src[r++];
      if (src.substr(r, 2) == "%}") {
        *tag_start = q;
        *tag_end = r + 2;
        *left_mod = lm;
        *right_mod = rm;
        return true;
      }
    }
    q += 2;
  }
  return false;
}

std::string NormalizeNewlines(std::string_view source, bool keep_trailing_newline) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out += source[i];
    }
  }
  if (!keep_trailing_newline && !out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

bool IsBlockLike(const Piece& p) {
  return p.kind == Piece::Kind::kStatement || p.kind == Piece::Kind::kComment;
}

void ApplyWhitespaceControl(const std::string& src, const TemplateOptions& options,
                            std::vector<Piece>* pieces) {
  for (size_t i = 0; i < pieces->size(); ++i) {
    Piece& text = (*pieces)[i];
    if (text.kind != Piece::Kind::kText) continue;
    const Piece* prev = i > 0 ? &(*pieces)[i - 1] : nullptr;
    const Piece* next = i + 1 < pieces->size() ? &(*pieces)[i + 1] : nullptr;
    bool line_start = text.offset == 0 || src[text.offset - 1] == '\n';
    if (prev != nullptr) {
      if (prev->right_mod == '-') {
        size_t k = 0;
        while (k < text.text.size() && IsSpace(text.text[k])) ++k;
        text.text.erase(0, k);
      } else if (options.trim_blocks && !text.verbatim && IsBlockLike(*prev) &&
                 prev->right_mod != '+' && !text.text.empty() && text.text[0] == '\n') {
        text.text.erase(0, 1);
        line_start = true;
      }
    }
    if (next != nullptr) {
      if (next->left_mod == '-') {
        size_t k = text.text.size();
        while (k > 0 && IsSpace(text.text[k - 1])) --k;
        text.text.resize(k);
      } else if (options.lstrip_blocks && IsBlockLike(*next) &&
                 next->left_mod != '+') {
        size_t nl = text.text.rfind('\n');
        size_t tail = nl == std::string::npos ? 0 : nl + 1;
        if (nl != std::string::npos || line_start) {
          bool blank = std::all_of(text.text.begin() + static_cast<std::ptrdiff_t>(tail),
                                   text.text.end(), [](char c) { return c == ' ' || c == '\t'; });
          if (blank) text.text.resize(tail);
        }
      }
    }
  }
}

}  // namespace

StatusOr<std::vector<Segment>> LexTemplate(std::string_view source, const TemplateOptions& options) {
  const std::string src = NormalizeNewlines(source, options.keep_trailing_newline);
  const LineIndex lines(src);
  TagLexer lexer(src, lines);
  std::vector<Piece> pieces;
  size_t pos = 0;
  const size_t n = src.size();
  auto add_text = [&](size_t from, size_t to, bool verbatim) {
    if (to <= from && !verbatim) return;
    Piece text;
    text.kind = Piece::Kind::kText;
    text.text = src.substr(from, to - from);
    text.offset = from;
    text.verbatim = verbatim;
    pieces.push_back(std::move(text));
  };
  while (pos < n) {
    size_t open = src.find('{', pos);
    while (open != std::string::npos && open + 1 < n && src[open + 1] != '{' &&
           src[open + 1] != '%' && src[open + 1] != '#') {
      open = src.find('{', open + 1);
    }
    if (open == std::string::npos || open + 1 >= n) {
      add_text(pos, n, false);
      break;
    }
    add_text(pos, open, false);
    Piece tag;
    tag.offset = open;
    char kind_char = src[open + 1];
    size_t body = open + 2;
    if (body < n && (src[body] == '-' || (src[body] == '+' && kind_char != '{'))) {
      tag.left_mod = src[body];
      ++body;
    }
    if (kind_char == '#') {
      tag.kind = Piece::Kind::kComment;
      size_t close = src.find("#}", body);
      if (close == std::string::npos) return lexer.Error(open, "unclosed comment (missing '#}')");
      if (close > body && (src[close - 1] == '-' || src[close - 1] == '+')) tag.right_mod = src[close - 1];
      pos = close + 2;
      pieces.push_back(std::move(tag));
      continue;
    }
    tag.kind = kind_char == '{' ? Piece::Kind::kExpression : Piece::Kind::kStatement;
    size_t end = 0;
    TERN_RETURN_IF_ERROR(lexer.LexTag(tag.kind, open, body, &tag, &end));
    pos = end;
    bool is_raw = tag.kind == Piece::Kind::kStatement && tag.tokens.size() == 1 &&
                  tag.tokens[0].kind == Token::Kind::kName && tag.tokens[0].text == "raw";
    if (!is_raw) {
      pieces.push_back(std::move(tag));
      continue;
    }
    size_t raw_start = 0, raw_end = 0;
    Piece end_tag;
    end_tag.kind = Piece::Kind::kStatement;
    end_tag.skip = true;
    if (!FindEndRaw(src, pos, &raw_start, &raw_end, &end_tag.left_mod, &end_tag.right_mod)) {
      return lexer.Error(open, "unclosed '{% raw %}' (missing '{% endraw %}')");
    }
    tag.skip = true;
    end_tag.offset = raw_start;
    pieces.push_back(std::move(tag));
    add_text(pos, raw_start, true);
    pieces.back().offset = pos;
    pieces.push_back(std::move(end_tag));
    pos = raw_end;
  }

  ApplyWhitespaceControl(src, options, &pieces);

  std::vector<Segment> segments;
  for (Piece& piece : pieces) {
    if (piece.skip || piece.kind == Piece::Kind::kComment) continue;
    Segment segment;
    lines.Locate(piece.offset, &segment.line, &segment.column);
    if (piece.kind == Piece::Kind::kText) {
      if (piece.text.empty()) continue;
      segment.kind = Segment::Kind::kText;
      segment.text = std::move(piece.text);
    } else {
      segment.kind = piece.kind == Piece::Kind::kExpression ? Segment::Kind::kExpression
                                                             : Segment::Kind::kStatement;
      segment.tokens = std::move(piece.tokens);
      Token end;
      end.kind = Token::Kind::kEnd;
      end.line = segment.line;
      end.column = segment.column;
      segment.tokens.push_back(end);
    }
    segments.push_back(std::move(segment));
  }
  return segments;
}

}  // namespace tern
