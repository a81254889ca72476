// Model: a llama-family transformer whose weights are views into a
// memory-mapped GGUF file (no copies), run one ForwardBatch at a time.
//
// Architectures: llama (Llama 1/2/3, TinyLlama, Mistral), qwen2 (QKV bias,
// NeoX RoPE). Load() validates every tensor the config needs (present, dtype
// supported, shape as the config says) and names the one at fault.
//
// Thread rules: Forward() is called by one thread at a time (the engine
// thread); it mutates the model's scratch buffers and the KvStorage.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "base/check.h"
#include "base/status.h"
#include "base/thread_pool.h"
#include "gguf/gguf_file.h"
#include "kv/kv_storage.h"
#include "model/forward_batch.h"
#include "model/model_config.h"

namespace tern {

// Sees the f32 input of every weight MatMul of a forward pass (imatrix
// calibration). Called on the forward thread.
class MatMulObserver {
 public:
  virtual ~MatMulObserver() = default;
  // x: [num_tokens, cols], the input multiplied by weight tensor weight_name.
  virtual void OnMatMul(const std::string& weight_name, const float* x,
                        int64_t num_tokens, int64_t cols) = 0;
};

class Model {
 public:
  virtual ~Model() = default;

  // Opens, validates and maps the model at path.
  static StatusOr<std::unique_ptr<Model>> Load(const std::string& path);
  // The config Load would use (supported architecture, hyper-parameters),
  // without mapping the weights: for sizing a context before an engine
  // loads the model.
  static StatusOr<ModelConfig> ReadConfig(const gguf::GgufFile& file);

  const ModelConfig& config() const { return config_; }
  const gguf::GgufFile& file() const { return *file_; }
  // Bytes of all weights read per decoded token (for rooflines).
  int64_t WeightBytes() const;
  // Weight bytes copied at load into the kernels' own layout (in 2 MiB
  // pages; the file's pages of them released).
  virtual int64_t PackedWeightBytes() const { return 0; }

  // Writes the K/V of every batch token into kv at batch.slots, then writes
  // the logits of batch.logits_rows into logits ([logits_rows.size(),
  // config().n_vocab], row-major). pool may be null.
  virtual void Forward(const ForwardBatch& batch, KvStorage& kv, float* logits,
                       ThreadPool* pool) = 0;

  // Rotates the keys of one slot of `layer` (k: n_head_kv x head_dim, as
  // stored after RoPE in a cache of k_dtype) as if their position moved by
  // delta: RoPE angles add, so keys computed at p become keys at p + delta
  // (streaming KV eviction). Models without RoPE keys do not override it
  // (streaming eviction then CHECK-fails rather than corrupt the cache).
  virtual void RotateKeys(int layer, float* k, int32_t delta, DType k_dtype) const {
    (void)layer, (void)k, (void)delta, (void)k_dtype;
    CHECK(false && "this model cannot re-rotate its keys");
  }

  // Optional; null to stop observing. Not owned.
  void SetMatMulObserver(MatMulObserver* observer) { observer_ = observer; }

 protected:
  ModelConfig config_;
  std::unique_ptr<gguf::GgufFile> file_;
  MatMulObserver* observer_ = nullptr;
};

}  // namespace tern
