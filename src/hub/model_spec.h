// ModelSpec: a model named by its Hugging Face repository, as `tern pull` and
// `-hf` take it:
//
//   ORG/REPO                 the repo's default GGUF (Q4_K_M if it has one,
//                            else the first .gguf by name)
//   ORG/REPO:QUANT           the .gguf whose name contains QUANT (any case)
//   ORG/REPO/FILE.gguf       that file; FILE may be a path inside the repo
//                            (ORG/REPO/dir/FILE.gguf)
//
// Parsing validates every name against path tricks ("..", empty segments,
// backslashes), so the cache path built from a spec stays inside the cache.
// Pure functions; no I/O.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace tern::hub {

struct ModelSpec {
  std::string org;
  std::string repo;
  std::string file;   // path inside the repo; empty: choose from the listing
  std::string quant;  // tag after ':'; empty: the default choice

  std::string RepoId() const { return org + "/" + repo; }
  // Back to the text form ("ORG/REPO:Q4_K_M", "ORG/REPO/f.gguf").
  std::string ToString() const;
};

StatusOr<ModelSpec> ParseModelSpec(std::string_view text);

// Checks a path inside a repo (from a spec or from a server's listing):
// relative, '/'-separated, no empty, "." or ".." segments, no backslash or
// control bytes.
Status ValidateRepoPath(std::string_view path);

bool IsGgufName(std::string_view name);

// For a split GGUF ("...-00001-of-00003.gguf") the number of parts, else 0.
int SplitGgufParts(std::string_view name);

// The file a QUANT spec (quant may be empty) stands for among a repo's
// files. Only .gguf files count; multimodal projector files ("mmproj") are
// skipped. With a tag, a name holding it as a whole token ("-Q4_K." beats
// "-Q4_K_M.") wins, then the first by name. Errors name the repo and list
// the .gguf files there are; a split GGUF is refused (not supported).
StatusOr<std::string> SelectGgufFile(const std::vector<std::string>& files,
                                     const std::string& quant, const std::string& repo_id);

}  // namespace tern::hub
