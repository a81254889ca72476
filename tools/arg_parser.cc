#include "tools/arg_parser.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "tools/flag_aliases.h"

namespace tern {
namespace {

std::vector<std::string> SplitNames(const std::string& names) {
  std::vector<std::string> out;
  std::stringstream ss(names);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(item);
  return out;
}

StatusOr<int64_t> ParseInt(const std::string& flag, const std::string& v) {
  errno = 0;
  char* end = nullptr;
  long long x = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || errno == ERANGE) {
    return InvalidArgument("flag " + flag + " expects an integer, got '" + v + "'");
  }
  return (int64_t)x;
}

StatusOr<double> ParseDouble(const std::string& flag, const std::string& v) {
  errno = 0;
  char* end = nullptr;
  double x = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0' || errno == ERANGE || !std::isfinite(x)) {
    return InvalidArgument("flag " + flag + " expects a number, got '" + v + "'");
  }
  return x;
}

// "--max_model_len" -> "--max-model-len"; short flags unchanged.
std::string Dashed(const std::string& name) {
  if (name.rfind("--", 0) != 0) return name;
  std::string out = name;
  std::replace(out.begin() + 2, out.end(), '_', '-');
  return out;
}

// "--Max-Tokens" -> "max-tokens": what edit distances compare.
std::string Key(const std::string& name) {
  std::string out = name.substr(name.find_first_not_of('-') == std::string::npos
                                    ? name.size()
                                    : name.find_first_not_of('-'));
  for (char& c : out) c = (char)std::tolower((unsigned char)c);
  return out;
}

std::string JoinNames(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) out += (i ? "/" : "") + names[i];
  return out;
}

// "a", "a or b", "a, b or c".
std::string OrList(const std::vector<std::string>& items) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += (i + 1 == items.size()) ? " or " : ", ";
    out += items[i];
  }
  return out;
}

}  // namespace

int EditDistance(const std::string& a, const std::string& b) {
  const size_t n = a.size(), m = b.size();
  std::vector<std::vector<int>> d(n + 1, std::vector<int>(m + 1));
  for (size_t i = 0; i <= n; ++i) d[i][0] = (int)i;
  for (size_t j = 0; j <= m; ++j) d[0][j] = (int)j;
  for (size_t i = 1; i <= n; ++i) {
    for (size_t j = 1; j <= m; ++j) {
      const int cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[n][m];
}

ArgParser::ArgParser(std::string usage, std::string description)
    : usage_(std::move(usage)), description_(std::move(description)) {}

void ArgParser::Add(const std::string& names, const std::string& metavar,
                    const std::string& help,
                    std::function<Status(const std::string&)> set) {
  options_.push_back({SplitNames(names), metavar, help, std::move(set)});
}

void ArgParser::AddString(const std::string& names, const std::string& metavar,
                          std::string* out, const std::string& help) {
  Add(names, metavar, help, [out](const std::string& v) {
    *out = v;
    return Status::Ok();
  });
}

void ArgParser::AddInt(const std::string& names, const std::string& metavar,
                       int64_t* out, const std::string& help) {
  Add(names, metavar, help, [out, names](const std::string& v) -> Status {
    TERN_ASSIGN_OR_RETURN(*out, ParseInt(names, v));
    return Status::Ok();
  });
}

void ArgParser::AddInt(const std::string& names, const std::string& metavar, int* out,
                       const std::string& help) {
  Add(names, metavar, help, [out, names](const std::string& v) -> Status {
    TERN_ASSIGN_OR_RETURN(int64_t x, ParseInt(names, v));
    if (x < INT32_MIN || x > INT32_MAX) {
      return InvalidArgument("flag " + names + " value out of range: " + v);
    }
    *out = (int)x;
    return Status::Ok();
  });
}

void ArgParser::AddDouble(const std::string& names, const std::string& metavar,
                          double* out, const std::string& help) {
  Add(names, metavar, help, [out, names](const std::string& v) -> Status {
    TERN_ASSIGN_OR_RETURN(*out, ParseDouble(names, v));
    return Status::Ok();
  });
}

void ArgParser::AddFlag(const std::string& names, bool* out, const std::string& help) {
  Add(names, "", help, [out](const std::string&) {
    *out = true;
    return Status::Ok();
  });
}

void ArgParser::AddList(const std::string& names, const std::string& metavar,
                        std::vector<std::string>* out, const std::string& help) {
  Add(names, metavar, help, [out](const std::string& v) {
    out->push_back(v);
    return Status::Ok();
  });
}

void ArgParser::SetPositional(const std::string& metavar, std::vector<std::string>* out,
                              const std::string& help) {
  positional_ = out;
  positional_metavar_ = metavar;
  positional_help_ = help;
}

void ArgParser::SetLonePositionalFlag(const std::string& name) { lone_positional_flag_ = name; }

void ArgParser::AddCheck(std::function<Status()> check) { checks_.push_back(std::move(check)); }

const ArgParser::Option* ArgParser::FindOption(const std::string& name) const {
  for (const Option& o : options_) {
    for (const std::string& n : o.names) {
      if (n == name) return &o;
    }
  }
  return nullptr;
}

std::string ArgParser::Suggest(const std::string& name) const {
  const std::string key = Key(name);
  if (key.size() < 2) return "";
  // Candidates: the command's flags, and the alias spellings of them.
  std::vector<std::pair<std::string, std::string>> candidates;  // key, flag to show
  for (const Option& o : options_) {
    for (const std::string& n : o.names) {
      if (Key(n).size() >= 2) candidates.emplace_back(Key(n), n);
    }
  }
  candidates.emplace_back("help", "--help");
  for (const FlagAlias& a : FlagAliases()) {
    if (a.kind == AliasKind::kNoEffect) continue;
    for (const std::string& target : SplitNames(a.targets)) {
      if (FindOption(target)) {
        candidates.emplace_back(Key(a.name), target);
        break;
      }
    }
  }
  const int threshold = key.size() <= 4 ? 1 : key.size() <= 8 ? 2 : 3;
  int best = threshold + 1;
  std::vector<std::string> picks;
  for (const auto& [cand_key, shown] : candidates) {
    int d = EditDistance(key, cand_key);
    // A prefix of a flag ("--top" for --top-k, --top-p) counts as close.
    if (key.size() >= 3 && cand_key.rfind(key, 0) == 0) d = std::min(d, threshold);
    if (d > threshold || d > best) continue;
    if (d < best) picks.clear();
    best = d;
    if (std::find(picks.begin(), picks.end(), shown) == picks.end()) picks.push_back(shown);
  }
  if (picks.size() > 3) picks.resize(3);
  return picks.empty() ? "" : "; did you mean " + OrList(picks) + "?";
}

StatusOr<const ArgParser::Option*> ArgParser::ResolveUnknown(const std::string& name,
                                                              bool* ignored,
                                                              bool* ignored_takes_value) {
  const std::string dashed = Dashed(name);
  if (const Option* o = FindOption(dashed)) return o;
  if (dashed == "--version" || dashed == "-V") {
    return InvalidArgument("unknown flag '" + name + "'; the version is 'tern --version'");
  }
  for (const FlagAlias& a : FlagAliases()) {
    if (dashed != a.name) continue;
    if (a.kind == AliasKind::kNoEffect) {
      warnings_.push_back(name + ": " + a.note);
      *ignored = true;
      *ignored_takes_value = a.takes_value;
      return static_cast<const Option*>(nullptr);
    }
    for (const std::string& target : SplitNames(a.targets)) {
      const Option* o = FindOption(target);
      if (!o) continue;
      if (a.kind == AliasKind::kSame) return o;
      return InvalidArgument("unknown flag '" + name + "'; did you mean " + target + "? (" +
                             a.note + ")");
    }
  }
  return InvalidArgument("unknown flag '" + name + "'" + Suggest(dashed));
}

Status ArgParser::TakeLonePositional(const std::string& value,
                                     const std::vector<const Option*>& seen) {
  const Option* opt = FindOption(lone_positional_flag_);
  if (!opt) return InvalidArgument("unexpected argument '" + value + "'");
  const std::string names = JoinNames(opt->names);
  if (std::find(seen.begin(), seen.end(), opt) != seen.end()) {
    return InvalidArgument("both " + names + " and the argument '" + value +
                           "' given; pass one (a lone argument stands for " + names + ")");
  }
  return opt->set(value);
}

Status ArgParser::Parse(int argc, char** argv) {
  warnings_.clear();
  std::vector<const Option*> seen;
  std::vector<std::string> lone;  // positionals standing for lone_positional_flag_
  bool only_positional = false;
  for (int i = 0; i < argc; ++i) {
    std::string arg = argv[i];
    if (!only_positional && arg == "--") {
      only_positional = true;
      continue;
    }
    // A lone "-" or a negative number is a positional value.
    const bool looks_like_flag = !only_positional && arg.size() > 1 && arg[0] == '-' &&
                                 !(std::isdigit((unsigned char)arg[1]) || arg[1] == '.');
    if (!looks_like_flag) {
      if (positional_) {
        positional_->push_back(arg);
      } else if (!lone_positional_flag_.empty() && lone.empty()) {
        lone.push_back(arg);
      } else if (!lone.empty()) {
        return InvalidArgument("unexpected argument '" + arg + "' ('" + lone[0] +
                               "' is already taken as " + lone_positional_flag_ + ")");
      } else {
        return InvalidArgument("unexpected argument '" + arg + "'");
      }
      continue;
    }
    if (arg == "-h" || arg == "--help") {
      help_requested_ = true;
      return Status::Ok();
    }
    std::string name = arg, value;
    bool has_inline = false;
    if (size_t eq = arg.find('='); eq != std::string::npos && arg.rfind("--", 0) == 0) {
      name = arg.substr(0, eq);
      value = arg.substr(eq + 1);
      has_inline = true;
    }
    const Option* opt = FindOption(name);
    if (!opt) {
      bool ignored = false, ignored_takes_value = false;
      TERN_ASSIGN_OR_RETURN(opt, ResolveUnknown(name, &ignored, &ignored_takes_value));
      if (ignored) {
        if (ignored_takes_value && !has_inline) {
          if (i + 1 >= argc) return InvalidArgument("flag " + name + " needs a value");
          ++i;
        }
        continue;
      }
    }
    seen.push_back(opt);
    if (opt->metavar.empty()) {
      if (has_inline) return InvalidArgument("flag " + name + " takes no value");
      TERN_RETURN_IF_ERROR(opt->set(""));
      continue;
    }
    if (!has_inline) {
      if (i + 1 >= argc) return InvalidArgument("flag " + name + " needs a value (" + opt->metavar + ")");
      value = argv[++i];
    }
    TERN_RETURN_IF_ERROR(opt->set(value));
  }
  if (!lone.empty()) TERN_RETURN_IF_ERROR(TakeLonePositional(lone[0], seen));
  for (const auto& check : checks_) TERN_RETURN_IF_ERROR(check());
  return Status::Ok();
}

std::string ArgParser::Help() const {
  std::ostringstream out;
  out << "usage: tern " << usage_ << "\n\n" << description_ << "\n";
  if (positional_) {
    out << "\narguments:\n  " << positional_metavar_ << "\n      " << positional_help_ << "\n";
  } else if (const Option* o = lone_positional_flag_.empty() ? nullptr : FindOption(lone_positional_flag_)) {
    out << "\narguments:\n  " << o->metavar << "\n      the same as " << JoinNames(o->names) << " "
        << o->metavar << " (give one or the other)\n";
  }
  out << "\noptions:\n";
  for (const Option& o : options_) {
    std::string names;
    for (size_t i = 0; i < o.names.size(); ++i) names += (i ? ", " : "") + o.names[i];
    if (!o.metavar.empty()) names += " " + o.metavar;
    out << "  " << names << "\n      " << o.help << "\n";
  }
  out << "  -h, --help\n      show this help and exit\n";
  return out.str();
}

StatusOr<int64_t> ParseByteSize(const std::string& text) {
  char* end = nullptr;
  errno = 0;
  double x = std::strtod(text.c_str(), &end);
  if (text.empty() || end == text.c_str() || errno == ERANGE || !(x >= 0)) {
    return InvalidArgument("not a size: '" + text + "' (try 2GiB, 512MiB, 4096)");
  }
  std::string unit(end);
  for (char& c : unit) c = (char)std::tolower((unsigned char)c);
  double mul = 1;
  if (unit.empty() || unit == "b") mul = 1;
  else if (unit == "k" || unit == "kib") mul = 1024.0;
  else if (unit == "m" || unit == "mib") mul = 1024.0 * 1024;
  else if (unit == "g" || unit == "gib") mul = 1024.0 * 1024 * 1024;
  else if (unit == "t" || unit == "tib") mul = 1024.0 * 1024 * 1024 * 1024;
  else if (unit == "kb") mul = 1e3;
  else if (unit == "mb") mul = 1e6;
  else if (unit == "gb") mul = 1e9;
  else if (unit == "tb") mul = 1e12;
  else return InvalidArgument("unknown size unit in '" + text + "' (use B, KiB, MiB, GiB, KB, MB, GB)");
  double bytes = x * mul;
  if (bytes > 9.0e18) return InvalidArgument("size too large: '" + text + "'");
  return (int64_t)std::llround(bytes);
}

int ParseOrExit(ArgParser& parser, int argc, char** argv, const char* command) {
  Status st = parser.Parse(argc, argv);
  for (const std::string& w : parser.warnings()) {
    std::fprintf(stderr, "tern %s: warning: %s\n", command, w.c_str());
  }
  if (!st.ok()) {
    std::fprintf(stderr, "tern %s: %s (see 'tern %s --help')\n", command,
                 st.message().c_str(), command);
    return 1;
  }
  if (parser.help_requested()) {
    std::fputs(parser.Help().c_str(), stdout);
    return 0;
  }
  return -1;
}

}  // namespace tern
