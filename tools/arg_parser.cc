#include "tools/arg_parser.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

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

}  // namespace

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

void ArgParser::AddCheck(std::function<Status()> check) { checks_.push_back(std::move(check)); }

const ArgParser::Option* ArgParser::FindOption(const std::string& name) const {
  for (const Option& o : options_) {
    for (const std::string& n : o.names) {
      if (n == name) return &o;
    }
  }
  return nullptr;
}

Status ArgParser::Parse(int argc, char** argv) {
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
      if (!positional_) {
        return InvalidArgument("unexpected argument '" + arg + "'");
      }
      positional_->push_back(arg);
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
    if (!opt) return InvalidArgument("unknown flag '" + name + "'");
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
  for (const auto& check : checks_) TERN_RETURN_IF_ERROR(check());
  return Status::Ok();
}

std::string ArgParser::Help() const {
  std::ostringstream out;
  out << "usage: tern " << usage_ << "\n\n" << description_ << "\n";
  if (positional_) {
    out << "\narguments:\n  " << positional_metavar_ << "\n      " << positional_help_ << "\n";
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

int ParseOrExit(ArgParser& parser, int argc, char** argv, const char* command) {
  Status st = parser.Parse(argc, argv);
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
