// tern pull SPEC [--offline]: fetches a GGUF model from the Hugging Face hub
// into the local cache (or finds it there) and prints its local path.
#include <cstdio>
#include <string>
#include <vector>

#include "hub/hub_config.h"
#include "hub/model_hub.h"
#include "tools/arg_parser.h"
#include "tools/commands.h"

namespace tern {

int RunPull(int argc, char** argv) {
  std::vector<std::string> specs;
  bool offline = false;
  ArgParser parser(
      "pull ORG/REPO[:QUANT | /FILE.gguf] [--offline]",
      "Downloads a GGUF model from the Hugging Face hub into the cache and prints its local\n"
      "path on stdout (progress on stderr). ORG/REPO takes the repo's Q4_K_M file (else its\n"
      "first .gguf), ORG/REPO:QUANT the .gguf whose name holds QUANT (any case),\n"
      "ORG/REPO/FILE.gguf that file (a path inside the repo). A cut download resumes where it\n"
      "stopped; the file's SHA-256 is checked against the hub's. A model already in the cache\n"
      "is used without touching the network. Every command's -hf SPEC does the same.\n\n"
      "environment: HF_ENDPOINT (default https://huggingface.co), HF_TOKEN (gated or private\n"
      "repos), HF_HUB_OFFLINE=1 (as --offline), TERN_CACHE (default $XDG_CACHE_HOME/tern,\n"
      "else ~/.cache/tern).");
  parser.SetPositional("SPEC", &specs, "the model: ORG/REPO, ORG/REPO:QUANT or ORG/REPO/FILE.gguf");
  parser.AddFlag("--offline", &offline,
                 "use only the cache, never the network (default: off, or on with HF_HUB_OFFLINE=1)");
  parser.AddCheck([&]() -> Status {
    if (specs.size() != 1) {
      return InvalidArgument("expected one model SPEC (ORG/REPO[:QUANT] or ORG/REPO/FILE.gguf), got " +
                             std::to_string(specs.size()));
    }
    return Status::Ok();
  });
  if (int rc = ParseOrExit(parser, argc, argv, "pull"); rc >= 0) return rc;
  hub::HubConfig config = hub::HubConfig::FromEnvironment();
  config.offline = config.offline || offline;
  StatusOr<std::string> path = hub::FetchModel(specs[0], config);
  if (!path.ok()) {
    std::fprintf(stderr, "tern pull: %s\n", path.status().message().c_str());
    return 1;
  }
  std::printf("%s\n", path->c_str());
  return 0;
}

}  // namespace tern
