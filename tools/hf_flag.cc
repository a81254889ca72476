#include "tools/hf_flag.h"

#include <memory>

#include "hub/hub_config.h"
#include "hub/model_hub.h"

namespace tern {

void AddHfRepoFlag(ArgParser& parser, std::string* model_path) {
  auto spec = std::make_shared<std::string>();
  parser.AddString("-hf,--hf-repo", "SPEC", spec.get(),
                   "fetch the model from the Hugging Face hub instead of -m: ORG/REPO[:QUANT] or "
                   "ORG/REPO/FILE.gguf, cached (default: none; see 'tern pull --help')");
  parser.AddCheck([spec, model_path]() -> Status {
    if (spec->empty()) return Status::Ok();
    if (!model_path->empty()) {
      return InvalidArgument("give the model either by -m PATH or by -hf SPEC, not both");
    }
    StatusOr<std::string> path = hub::FetchModel(*spec, hub::HubConfig::FromEnvironment());
    if (!path.ok()) return path.status().WithContext("-hf " + *spec);
    *model_path = *path;
    return Status::Ok();
  });
}

}  // namespace tern
