#include "spec/model_copy.h"

#include <cmath>
#include <cstring>
#include <map>
#include <span>
#include <vector>

#include "gguf/gguf_writer.h"
#include "sample/rng.h"

namespace tern {

namespace {

// Standard normal from two uniforms (Box-Muller).
double Normal(Rng& rng) {
  const double u1 = 1.0 - rng.Uniform();
  const double u2 = rng.Uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

double Rms(std::span<const float> v) {
  double ss = 0;
  for (float x : v) ss += (double)x * x;
  return std::sqrt(ss / std::max<size_t>(v.size(), 1));
}

std::span<const float> F32(const gguf::TensorInfo& t) {
  return std::span<const float>(reinterpret_cast<const float*>(t.data), (size_t)t.NumElements());
}

}  // namespace

Status WritePerturbedCopy(const gguf::GgufFile& src, const std::string& out, double noise,
                          uint64_t seed) {
  gguf::GgufWriter w;
  w.CopyMetadataFrom(src);
  Rng rng(seed);
  for (const gguf::TensorInfo& t : src.tensors()) {
    if (t.dtype != DType::kF32 || t.shape.size() != 2 || noise == 0) {
      TERN_RETURN_IF_ERROR(w.AddTensor(t.name, t.dtype, t.shape, t.data, t.num_bytes));
      continue;
    }
    const int64_t n = t.NumElements();
    std::vector<float> v(n);
    std::memcpy(v.data(), t.data, n * sizeof(float));
    double ss = 0;
    for (float x : v) ss += (double)x * x;
    const double scale = noise * std::sqrt(ss / std::max<int64_t>(n, 1));
    for (float& x : v) x += (float)(scale * Normal(rng));
    TERN_RETURN_IF_ERROR(w.AddTensor(t.name, t.dtype, t.shape, v.data(), n * sizeof(float)));
  }
  return w.WriteFile(out);
}

Status GrowModel(const gguf::GgufFile& src, const std::string& out, const GrowOptions& o) {
  const gguf::Value* arch_v = nullptr;
  for (const auto& [key, value] : src.metadata()) {
    if (key == "general.architecture") arch_v = &value;
  }
  if (arch_v == nullptr || arch_v->AsString() == nullptr) {
    return InvalidArgument("grow: the source has no general.architecture");
  }
  const std::string arch = *arch_v->AsString();
  auto u32 = [&](const std::string& key) -> int64_t {
    for (const auto& [k, v] : src.metadata()) {
      if (k == key) {
        if (const auto x = v.AsInt()) return *x;
      }
    }
    return -1;
  };
  const int64_t n_layer = u32(arch + ".block_count");
  const int64_t n_ff = u32(arch + ".feed_forward_length");
  const int64_t n_embd = u32(arch + ".embedding_length");
  if (n_layer <= 0 || n_ff <= 0 || n_embd <= 0) {
    return InvalidArgument("grow: the source lacks " + arch + ".block_count, feed_forward_length or embedding_length");
  }
  if (o.ffn_size < n_ff) {
    return InvalidArgument("grow: --ffn-size " + std::to_string(o.ffn_size) +
                           " is below the source's feed_forward_length " + std::to_string(n_ff));
  }
  if (o.extra_layers < 0) return InvalidArgument("grow: --extra-layers must be >= 0");
  std::map<std::string, const gguf::TensorInfo*> by_name;
  for (const gguf::TensorInfo& t : src.tensors()) {
    if (t.dtype != DType::kF32) {
      return InvalidArgument("grow: tensor " + t.name + " is " + DTypeName(t.dtype) +
                             "; grow needs an all-F32 source (e.g. stories260K)");
    }
    by_name[t.name] = &t;
  }
  const int64_t F = o.ffn_size;
  Rng rng(o.seed);
  gguf::GgufWriter w;
  w.CopyMetadataFrom(src);
  w.SetValue(arch + ".block_count", gguf::Value::Uint32((uint32_t)(n_layer + o.extra_layers)));
  w.SetValue(arch + ".feed_forward_length", gguf::Value::Uint32((uint32_t)F));
  // gate/up: [n_embd, n_ff] (n_ff rows of n_embd) -> F rows, new ones random
  // at the rows' own scale.
  auto widen_in = [&](const gguf::TensorInfo& t, const std::string& name) {
    std::span<const float> v = F32(t);
    const double scale = Rms(v);
    std::vector<float> x(v.begin(), v.end());
    x.reserve((size_t)F * n_embd);
    for (int64_t i = (int64_t)v.size(); i < F * n_embd; ++i) x.push_back((float)(scale * Normal(rng)));
    return w.AddTensor(name, DType::kF32, {n_embd, F}, x.data(), x.size() * sizeof(float));
  };
  // down: [n_ff, n_embd] (n_embd rows of n_ff) -> rows of F, new columns
  // noise; with keep = false every column is noise.
  auto widen_out = [&](const gguf::TensorInfo& t, const std::string& name, bool keep) {
    std::span<const float> v = F32(t);
    const double scale = o.noise * Rms(v);
    const int64_t rows = t.NumRows(), cols = t.RowLength();
    std::vector<float> x((size_t)rows * F);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < F; ++c) {
        const bool old = keep && c < cols;
        x[r * F + c] = old ? v[r * cols + c] : (float)(scale * Normal(rng));
      }
    }
    return w.AddTensor(name, DType::kF32, {F, rows}, x.data(), x.size() * sizeof(float));
  };
  auto noise_like = [&](const gguf::TensorInfo& t, const std::string& name) {
    std::span<const float> v = F32(t);
    const double scale = o.noise * Rms(v);
    std::vector<float> x(v.size());
    for (float& e : x) e = (float)(scale * Normal(rng));
    return w.AddTensor(name, DType::kF32, t.shape, x.data(), x.size() * sizeof(float));
  };
  for (const gguf::TensorInfo& t : src.tensors()) {
    const bool gate_up = t.name.ends_with(".ffn_gate.weight") || t.name.ends_with(".ffn_up.weight");
    if (gate_up) {
      TERN_RETURN_IF_ERROR(widen_in(t, t.name));
    } else if (t.name.ends_with(".ffn_down.weight")) {
      TERN_RETURN_IF_ERROR(widen_out(t, t.name, true));
    } else {
      TERN_RETURN_IF_ERROR(w.AddTensor(t.name, t.dtype, t.shape, t.data, t.num_bytes));
    }
  }
  for (int64_t j = 0; j < o.extra_layers; ++j) {
    const std::string from = "blk." + std::to_string(j % n_layer) + ".";
    const std::string to = "blk." + std::to_string(n_layer + j) + ".";
    for (const auto& [name, t] : by_name) {
      if (!name.starts_with(from)) continue;
      const std::string suffix = name.substr(from.size());
      const std::string dst = to + suffix;
      if (suffix == "ffn_gate.weight" || suffix == "ffn_up.weight") {
        TERN_RETURN_IF_ERROR(widen_in(*t, dst));
      } else if (suffix == "ffn_down.weight") {
        TERN_RETURN_IF_ERROR(widen_out(*t, dst, false));
      } else if (suffix == "attn_output.weight") {
        TERN_RETURN_IF_ERROR(noise_like(*t, dst));
      } else {
        TERN_RETURN_IF_ERROR(w.AddTensor(dst, t->dtype, t->shape, t->data, t->num_bytes));
      }
    }
  }
  return w.WriteFile(out);
}

}  // namespace tern
