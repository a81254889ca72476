#include "spec/model_copy.h"

#include <cmath>
#include <cstring>
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

}  // namespace tern
