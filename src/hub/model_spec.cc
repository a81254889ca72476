#include "hub/model_spec.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>

namespace tern::hub {
namespace {

constexpr std::string_view kDefaultQuant = "q4_k_m";
constexpr std::string_view kMmproj = "mmproj";

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = (char)std::tolower((unsigned char)c);
  return out;
}

bool IsNameChar(char c) {
  return std::isalnum((unsigned char)c) || c == '-' || c == '_' || c == '.';
}

// An org, repo or quant tag: [A-Za-z0-9._-]+, not "." or "..".
Status ValidateName(std::string_view name, const char* what, std::string_view spec) {
  const std::string quoted = "'" + std::string(spec) + "'";
  if (name.empty()) return InvalidArgument("model spec " + quoted + ": empty " + what);
  if (name == "." || name == "..") {
    return InvalidArgument("model spec " + quoted + ": " + what + " cannot be '" +
                           std::string(name) + "'");
  }
  for (char c : name) {
    if (!IsNameChar(c)) {
      return InvalidArgument("model spec " + quoted + ": " + what + " '" + std::string(name) +
                             "' may hold only letters, digits, '-', '_' and '.'");
    }
  }
  return Status::Ok();
}

std::vector<std::string_view> Split(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    const size_t at = s.find(sep, start);
    parts.push_back(s.substr(start, at == std::string_view::npos ? std::string_view::npos
                                                                  : at - start));
    if (at == std::string_view::npos) return parts;
    start = at + 1;
  }
}

// Whether `tag` occurs in `name` (both lower case) as a whole token: not
// followed or preceded by a letter, digit or '_'.
bool HasWholeToken(const std::string& name, const std::string& tag) {
  for (size_t at = name.find(tag); at != std::string::npos; at = name.find(tag, at + 1)) {
    const size_t end = at + tag.size();
    const bool left = at == 0 || !(std::isalnum((unsigned char)name[at - 1]) || name[at - 1] == '_');
    const bool right =
        end == name.size() || !(std::isalnum((unsigned char)name[end]) || name[end] == '_');
    if (left && right) return true;
  }
  return false;
}

std::string JoinNames(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out.empty() ? "(none)" : out;
}

}  // namespace

std::string ModelSpec::ToString() const {
  std::string out = RepoId();
  if (!file.empty()) out += "/" + file;
  if (!quant.empty()) out += ":" + quant;
  return out;
}

bool IsGgufName(std::string_view name) {
  return name.size() > 5 && Lower(name.substr(name.size() - 5)) == ".gguf";
}

int SplitGgufParts(std::string_view name) {
  // "<stem>-NNNNN-of-MMMMM.gguf"
  constexpr std::string_view kOf = "-of-";
  if (!IsGgufName(name) || name.size() < 5 + 5 + 4 + 5 + 1) return 0;
  const std::string_view tail = name.substr(name.size() - 5 - 5 - 4 - 5 - 1, 20);
  if (tail[0] != '-' || tail.substr(6, 4) != kOf) return 0;
  for (size_t i : {1, 2, 3, 4, 5, 10, 11, 12, 13, 14}) {
    if (!std::isdigit((unsigned char)tail[i])) return 0;
  }
  return std::atoi(std::string(tail.substr(10, 5)).c_str());
}

Status ValidateRepoPath(std::string_view path) {
  if (path.empty()) return InvalidArgument("empty file path");
  for (char c : path) {
    if (c == '\\' || (unsigned char)c < 0x20 || c == 0x7f) {
      return InvalidArgument("file path '" + std::string(path) +
                             "' holds a backslash or a control character");
    }
  }
  for (std::string_view segment : Split(path, '/')) {
    if (segment.empty() || segment == "." || segment == "..") {
      return InvalidArgument("file path '" + std::string(path) +
                             "' has an empty, '.' or '..' segment");
    }
  }
  return Status::Ok();
}

StatusOr<ModelSpec> ParseModelSpec(std::string_view text) {
  const std::string quoted = "'" + std::string(text) + "'";
  ModelSpec spec;
  std::string_view rest = text;
  if (const size_t colon = rest.rfind(':'); colon != std::string_view::npos) {
    spec.quant = std::string(rest.substr(colon + 1));
    rest = rest.substr(0, colon);
    TERN_RETURN_IF_ERROR(ValidateName(spec.quant, "quantization tag after ':'", text));
  }
  const std::vector<std::string_view> parts = Split(rest, '/');
  if (parts.size() < 2) {
    return InvalidArgument("model spec " + quoted +
                           ": expected ORG/REPO, ORG/REPO:QUANT or ORG/REPO/FILE.gguf");
  }
  TERN_RETURN_IF_ERROR(ValidateName(parts[0], "organisation", text));
  TERN_RETURN_IF_ERROR(ValidateName(parts[1], "repository", text));
  spec.org = std::string(parts[0]);
  spec.repo = std::string(parts[1]);
  if (parts.size() > 2) {
    const size_t file_at = parts[0].size() + 1 + parts[1].size() + 1;
    spec.file = std::string(rest.substr(file_at));
    if (!spec.quant.empty()) {
      return InvalidArgument("model spec " + quoted +
                             ": give either a file or a ':QUANT' tag, not both");
    }
    if (Status st = ValidateRepoPath(spec.file); !st.ok()) {
      return InvalidArgument("model spec " + quoted + ": " + st.message());
    }
    if (!IsGgufName(spec.file)) {
      return InvalidArgument("model spec " + quoted + ": '" + spec.file +
                             "' is not a .gguf file");
    }
    if (const int parts = SplitGgufParts(spec.file); parts > 1) {
      return Unimplemented("model spec " + quoted + ": '" + spec.file +
                           "' is part of a GGUF split into " + std::to_string(parts) +
                           " files, which tern does not load; merge the parts into one file first");
    }
  }
  return spec;
}

StatusOr<std::string> SelectGgufFile(const std::vector<std::string>& files,
                                     const std::string& quant, const std::string& repo_id) {
  std::vector<std::string> ggufs;
  for (const std::string& f : files) {
    if (IsGgufName(f) && Lower(f).find(kMmproj) == std::string::npos) ggufs.push_back(f);
  }
  std::sort(ggufs.begin(), ggufs.end());
  if (ggufs.empty()) return NotFound(repo_id + " holds no .gguf file");
  const std::string tag = Lower(quant.empty() ? kDefaultQuant : quant);
  std::string chosen;
  for (const std::string& f : ggufs) {  // a whole-token match first
    if (HasWholeToken(Lower(f), tag)) {
      chosen = f;
      break;
    }
  }
  for (size_t i = 0; chosen.empty() && i < ggufs.size(); ++i) {
    if (Lower(ggufs[i]).find(tag) != std::string::npos) chosen = ggufs[i];
  }
  if (chosen.empty() && quant.empty()) chosen = ggufs[0];
  if (chosen.empty()) {
    return NotFound(repo_id + " has no .gguf file matching '" + quant + "'; its .gguf files: " +
                    JoinNames(ggufs));
  }
  if (const int parts = SplitGgufParts(chosen); parts > 1) {
    return Unimplemented(repo_id + ": '" + chosen + "' is part of a GGUF split into " +
                         std::to_string(parts) +
                         " files, which tern does not load; merge the parts into one file "
                         "first, or choose another quantization");
  }
  return chosen;
}

}  // namespace tern::hub
