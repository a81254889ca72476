// AVX2 + FMA + F16C build of the x86 kernels (simd_kernels_impl.h).
#include "kernels/x86/avx2_kernels.h"

#include "kernels/x86/simd_kernels_impl.h"

namespace tern::kernels {

void FillAvx2Kernels(KernelTable* t) { FillSimdTable(t, "avx2"); }

}  // namespace tern::kernels
