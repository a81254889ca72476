// Prefetch addresses along the row streams of a decode tile, shared by the
// x86 kernel builds. Internal linkage: each build has its own copy.
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace tern::kernels {
namespace {

// Prefetch address for a decode tile of R rows: byte `off` of row r (rows of
// `rb` weight bytes), or, past the row's end, the matching byte of row r + R
// (the row this stream takes in the next tile), so every row stream stays
// warm across tiles.
inline const char* PrefetchAddress(const uint8_t* w, int64_t wrb, int r, int R, int64_t off,
                                   int64_t rb) {
  return off < rb ? (const char*)(w + r * wrb + off)
                  : (const char*)(w + (r + R) * wrb + (off - rb));
}

// The K-quant packed decodes' one stream a thread (a tile's super-blocks,
// a group's chunks and the groups lie back to back, so a fixed distance in
// bytes follows the walk): every line of the kBytes at p + kStreamAhead
// into L1, p the super-block about to be read (past a matrix's end, a
// harmless prefetch). 2 KiB: AMD EPYC Zen 5, 2 threads, `tern bench
// kernels --panel16 -p 4`, alternated runs, of the read probe of the same
// run, without -> 2 KiB ahead: AVX-512 Q4_K 63-89% -> 95-102% (4 and 8
// KiB about the same, every other line no gain); AVX2 Q4_K 50-58% ->
// 92-101%, Q5_K 42-53% -> 87-101%, Q6_K 53-63% -> 94-120%. The hardware
// prefetchers left these streams short of bandwidth; Q4_0's and Q8_0's
// packed decodes gained nothing from the same. And every line at p +
// kStreamFar into L2 (prefetcht2): the read probe (which reads this way)
// read more with it on an Intel Xeon (family 6 model 207, AVX-512, no
// AMX; 2 threads, `tern bench -p 0 -n 1 --pairs 0`, 5 runs alternated,
// best round 29.6/29.3/33.7/32.3/33.4 -> 30.3/32.1/34.7/33.9/34.3 GB/s),
// so the yardstick is the stronger one; the AVX-512 Q4_0/Q8_0 packed
// decodes (which prefetch 32 KiB ahead into L2 besides) read the same with
// it there (tinyllama tg128, 2 rounds alternated: Q4_0 48.6/52.0 ->
// 50.8/51.4, Q8_0 28.8/28.2 -> 28.9/28.6 tok/s), the AVX2 ones more (Q4_0
// 43.9/43.9 -> 49.8/46.3, Q8_0 26.1/26.4 -> 27.8/29.2, Q4_K_M 37.1/36.7 ->
// 44.5/44.4 with the row decodes below), and the F16 decode (FloatLanes16,
// its own prefetch loop) 8-10% more.
constexpr int64_t kStreamAhead = 2048, kStreamFar = 4096;
// Every line of the kBytes at near into L1 (prefetcht0), then of the kBytes
// at far into L2 (prefetcht2).
template <int64_t kBytes>
__attribute__((always_inline)) inline void PrefetchNearFar(const uint8_t* near,
                                                       const uint8_t* far) {
  for (int64_t i = 0; i < kBytes; i += 64) {
    asm volatile("prefetcht0 %0" : : "m"(*(near + i)));
  }
  for (int64_t i = 0; i < kBytes; i += 64) {
    asm volatile("prefetcht2 %0" : : "m"(*(far + i)));
  }
}
template <int64_t kBytes>
__attribute__((always_inline)) inline void PrefetchStreamAhead(const uint8_t* p) {
  PrefetchNearFar<kBytes>(p + kStreamAhead, p + kStreamFar);
}

// A tile of kRows rows walked block by block (the panel unpacks): while it
// reads its block b, the next tile's rows (at next, rows back to back) into
// L2 in byte order, kRows blocks' worth per block of this tile, so the next
// tile's bytes arrive as this one's are used. Always inlined, as
// the prefetches elsewhere (GCC deleted _mm_prefetch calls it judged free
// of side effects).
template <int kRows, int64_t kBlockBytes>
__attribute__((always_inline)) inline void PrefetchNextTile(const uint8_t* next, int64_t b) {
  constexpr int kLines = (int)((kRows * kBlockBytes + 63) / 64);
  for (int j = 0; j < kLines; ++j) {
    _mm_prefetch((const char*)(next + b * kRows * kBlockBytes + 64 * j), _MM_HINT_T1);
  }
}

}  // namespace
}  // namespace tern::kernels
