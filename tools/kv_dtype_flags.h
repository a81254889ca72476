// The KV cache element type flags every command that runs a model shares
// (serve, batch, generate, chat, bench, perplexity, eval-quant, kv-calc):
//   --kv-cache-dtype TYPE     K and V (f16, bf16, f32, q8_0, q4_0)
//   --kv-cache-dtype-k TYPE   K alone (default: --kv-cache-dtype)
//   --kv-cache-dtype-v TYPE   V alone (default: --kv-cache-dtype)
// Registered, documented and checked in one place (an unknown type names the
// choices); whether the model's K/V row holds whole blocks is checked where
// the model is known (kv/kv_storage.h CheckKvRow).
#pragma once

#include <optional>
#include <string>

#include "base/status.h"
#include "model/model_config.h"
#include "tensor/dtype.h"
#include "tools/arg_parser.h"

namespace tern {

// "f16, bf16, f32, q8_0, q4_0": the choices, as the help and errors list them.
const char* KvDtypeChoices();

// A dtype's lowercase name as the flags take it ("q8_0").
std::string KvDtypeName(DType t);

// A KV cache dtype by name; the error names flag, the value and the choices.
StatusOr<DType> ParseKvDtype(const std::string& flag, const std::string& name);

struct KvDtypeFlags {
  std::string both;  // --kv-cache-dtype ("" = the default)
  std::string k, v;  // --kv-cache-dtype-k / -v ("" = as --kv-cache-dtype)
  // Resolved by the parser's check.
  DType k_dtype = DType::kF16;
  DType v_dtype = DType::kF16;
  bool given = false;  // any of the three flags given

  // "q8_0", or "K q8_0, V q4_0".
  std::string Name() const;
};

// OK when the model's K/V row (KV heads x head_dim) holds whole blocks of
// both dtypes; else the start-up error naming the model's head_dim and KV
// heads (kv/kv_storage.h CheckKvRow), prefixed with model_path. Prints
// KvRowWarning's line to stderr when there is one.
Status CheckKvDtypesFit(const KvDtypeFlags& flags, const ModelConfig& config,
                        const std::string& model_path);

// Registers the three flags; default_name is --kv-cache-dtype's default
// ("f16"; perplexity: "f32"). The check fills k_dtype and v_dtype.
void AddKvDtypeFlags(ArgParser& parser, KvDtypeFlags* flags, const std::string& default_name);

}  // namespace tern
