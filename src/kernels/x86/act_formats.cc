// The x86 activation layouts' shared helpers (act_formats.h).
#include "kernels/x86/act_formats.h"

#include <cstring>

namespace tern::kernels {

void Q8KToImage(const ActBlockQ8K& k, ActBlockQ8KImage* out) {
  // Natural-order sub-block stored at register-order position i.
  constexpr int kOrder[8] = {0, 2, 1, 3, 4, 6, 5, 7};
  out->d = k.d;
  for (int i = 0; i < 8; ++i) {
    out->sums32[i] = k.sums32[i];
    std::memcpy(out->qs + 32 * i, k.qs + 32 * kOrder[i], 32);
  }
}

}  // namespace tern::kernels
