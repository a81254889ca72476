#include "model/model.h"

#include "model/llama_model.h"

namespace tern {

StatusOr<std::unique_ptr<Model>> Model::Load(const std::string& path) {
  std::unique_ptr<gguf::GgufFile> file;
  TERN_ASSIGN_OR_RETURN(file, gguf::GgufFile::Open(path));
  ModelConfig config;
  TERN_ASSIGN_OR_RETURN(config, ReadConfig(*file));
  return LlamaModel::Create(std::move(file), config);
}

StatusOr<ModelConfig> Model::ReadConfig(const gguf::GgufFile& file) {
  const std::string arch = file.GetString("general.architecture").value_or("");
  if (!IsSupportedArchitecture(arch)) {
    return Unimplemented(file.path() + ": unsupported architecture '" + arch + "' (supported: " +
                         kSupportedArchitectures + ")");
  }
  return ModelConfig::FromGguf(file);
}

int64_t Model::WeightBytes() const {
  // Every tensor is read once per decoded token, except the embedding table,
  // of which one row is read (unless it doubles as the output matrix).
  int64_t bytes = 0;
  for (const gguf::TensorInfo& t : file_->tensors()) bytes += (int64_t)t.num_bytes;
  if (!config_.tied_embeddings) {
    if (const gguf::TensorInfo* e = file_->FindTensor("token_embd.weight")) {
      bytes -= (int64_t)e->num_bytes;
    }
  }
  return bytes;
}

}  // namespace tern
