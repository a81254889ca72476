#include "kernels/cpu_features.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace tern::kernels {

CpuFeatures DetectCpuFeatures() {
  CpuFeatures f;
#if defined(__x86_64__) || defined(__i386__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return f;
  const bool osxsave = (ecx >> 27) & 1;
  const bool avx = (ecx >> 28) & 1;
  const bool fma = (ecx >> 12) & 1;
  const bool f16c = (ecx >> 29) & 1;
  if (!osxsave || !avx) return f;
  unsigned xcr0_lo = 0, xcr0_hi = 0;
  __asm__ volatile("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
  if ((xcr0_lo & 6) != 6) return f;  // XMM and YMM state enabled by the OS
  if (__get_cpuid_max(0, nullptr) < 7) return f;
  __cpuid_count(7, 0, eax, ebx, ecx, edx);
  f.avx2 = (ebx >> 5) & 1;
  f.fma = fma;
  f.f16c = f16c;
  const bool avx512f = (ebx >> 16) & 1, avx512bw = (ebx >> 30) & 1, avx512vl = (ebx >> 31) & 1;
  const bool vnni = (ecx >> 11) & 1, vbmi = (ecx >> 1) & 1;
  const bool zmm_state = (xcr0_lo & 0xE0) == 0xE0;  // opmask, ZMM0-15 upper, ZMM16-31
  f.avx512_vnni = avx512f && avx512bw && avx512vl && vnni && vbmi && zmm_state;
  const bool amx_tile = (edx >> 24) & 1, amx_int8 = (edx >> 25) & 1;
  const bool tile_state = (xcr0_lo & 0x60000) == 0x60000;  // XTILECFG, XTILEDATA
  f.amx_int8 = amx_tile && amx_int8 && tile_state;
#endif
  return f;
}

}  // namespace tern::kernels
