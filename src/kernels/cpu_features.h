// CpuFeatures: the x86 instruction-set extensions the kernels care about,
// detected once with cpuid (and xgetbv for OS support of the AVX state).
//
// Thread rules: DetectCpuFeatures() is pure and thread-safe.
#pragma once

namespace tern::kernels {

struct CpuFeatures {
  bool avx2 = false;
  bool fma = false;
  bool f16c = false;
  // AVX-512 F/VL/BW/VNNI/VBMI with the OS saving the opmask and ZMM state.
  bool avx512_vnni = false;
  // AMX-TILE and AMX-INT8 with the OS saving the tile state (the process
  // must still ask Linux for it: see AmxKernelTable()).
  bool amx_int8 = false;
  bool HasAvx2Fma() const { return avx2 && fma && f16c; }
  bool HasAvx512Vnni() const { return HasAvx2Fma() && avx512_vnni; }
  bool HasAmxInt8() const { return HasAvx512Vnni() && amx_int8; }
};

CpuFeatures DetectCpuFeatures();

}  // namespace tern::kernels
