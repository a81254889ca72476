// Prefetch addresses along the row streams of a decode tile, shared by the
// x86 kernel builds. Internal linkage: each build has its own copy.
#pragma once

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

}  // namespace
}  // namespace tern::kernels
