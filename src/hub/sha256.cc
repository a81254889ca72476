#include "hub/sha256.h"

#include <openssl/evp.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

namespace tern::hub {
namespace {

struct MdCtxDeleter {
  void operator()(EVP_MD_CTX* ctx) const { EVP_MD_CTX_free(ctx); }
};
using MdCtx = std::unique_ptr<EVP_MD_CTX, MdCtxDeleter>;

struct FileCloser {
  void operator()(FILE* f) const { std::fclose(f); }
};

std::string Hex(const unsigned char* bytes, unsigned int n) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < n; ++i) {
    out += kDigits[bytes[i] >> 4];
    out += kDigits[bytes[i] & 15];
  }
  return out;
}

MdCtx NewSha256() {
  MdCtx ctx(EVP_MD_CTX_new());
  if (ctx && EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1) ctx.reset();
  return ctx;
}

std::string Finish(EVP_MD_CTX* ctx) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  if (EVP_DigestFinal_ex(ctx, digest, &n) != 1) return "";
  return Hex(digest, n);
}

}  // namespace

std::string Sha256Hex(std::string_view data) {
  MdCtx ctx = NewSha256();
  if (!ctx || EVP_DigestUpdate(ctx.get(), data.data(), data.size()) != 1) return "";
  return Finish(ctx.get());
}

StatusOr<std::string> Sha256File(const std::string& path) {
  std::unique_ptr<FILE, FileCloser> f(std::fopen(path.c_str(), "rb"));
  if (!f) return NotFound("cannot open " + path + ": " + std::strerror(errno));
  MdCtx ctx = NewSha256();
  if (!ctx) return Internal("SHA-256 unavailable in libcrypto");
  std::vector<char> buf(1 << 20);
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), f.get())) > 0) {
    if (EVP_DigestUpdate(ctx.get(), buf.data(), n) != 1) return Internal("SHA-256 update failed");
  }
  if (std::ferror(f.get())) return DataLoss("read error in " + path + ": " + std::strerror(errno));
  return Finish(ctx.get());
}

bool IsSha256Hex(std::string_view text) {
  if (text.size() != 64) return false;
  for (char c : text) {
    if (!std::isxdigit((unsigned char)c)) return false;
  }
  return true;
}

}  // namespace tern::hub
