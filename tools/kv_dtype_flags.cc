#include "tools/kv_dtype_flags.h"

#include <cctype>
#include <cstdio>

#include "kernels/kernels.h"
#include "kv/kv_storage.h"

namespace tern {

const char* KvDtypeChoices() { return "f16, bf16, f32, q8_0, q4_0"; }

StatusOr<DType> ParseKvDtype(const std::string& flag, const std::string& name) {
  std::optional<DType> d = ParseDType(name);
  if (!d || !kernels::IsKvDtype(*d)) {
    return InvalidArgument(flag + " must be one of " + KvDtypeChoices() + ", got '" + name + "'");
  }
  return *d;
}

std::string KvDtypeName(DType t) {
  std::string s = DTypeName(t);
  for (char& c : s) c = (char)std::tolower((unsigned char)c);
  return s;
}

std::string KvDtypeFlags::Name() const {
  if (k_dtype == v_dtype) return KvDtypeName(k_dtype);
  return "K " + KvDtypeName(k_dtype) + ", V " + KvDtypeName(v_dtype);
}

Status CheckKvDtypesFit(const KvDtypeFlags& flags, const ModelConfig& config,
                        const std::string& model_path) {
  for (DType t : {flags.k_dtype, flags.v_dtype}) {
    TERN_RETURN_IF_ERROR(CheckKvRow(t, config.n_head_kv, config.head_dim).WithContext(model_path));
  }
  const std::string warning = KvRowWarning(flags.k_dtype, config.n_head_kv, config.head_dim);
  if (!warning.empty()) std::fprintf(stderr, "warning: %s\n", warning.c_str());
  return Status::Ok();
}

void AddKvDtypeFlags(ArgParser& parser, KvDtypeFlags* f, const std::string& default_name) {
  parser.AddString("--kv-cache-dtype", "TYPE", &f->both,
                   std::string("KV cache element type of K and V: ") + KvDtypeChoices() +
                       "; q8_0/q4_0 store blocks of 32 values with an f16 scale (34/32 and "
                       "18/32 bytes per value) (default " + default_name + ")");
  parser.AddString("--kv-cache-dtype-k", "TYPE", &f->k,
                   "K's element type alone (default: --kv-cache-dtype)");
  parser.AddString("--kv-cache-dtype-v", "TYPE", &f->v,
                   "V's element type alone (default: --kv-cache-dtype)");
  parser.AddCheck([f, default_name]() -> Status {
    f->given = !f->both.empty() || !f->k.empty() || !f->v.empty();
    TERN_ASSIGN_OR_RETURN(DType both,
                          ParseKvDtype("--kv-cache-dtype", f->both.empty() ? default_name : f->both));
    f->k_dtype = both;
    f->v_dtype = both;
    if (!f->k.empty()) {
      TERN_ASSIGN_OR_RETURN(f->k_dtype, ParseKvDtype("--kv-cache-dtype-k", f->k));
    }
    if (!f->v.empty()) {
      TERN_ASSIGN_OR_RETURN(f->v_dtype, ParseKvDtype("--kv-cache-dtype-v", f->v));
    }
    return Status::Ok();
  });
}

}  // namespace tern
