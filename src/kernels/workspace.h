// Workspace: the kernels' scratch memory, owned by whoever runs them (the
// model holds one next to its activation buffers: LlamaModel) and passed to
// every MatMul / Attention call. No kernel keeps memory of its own between
// calls, so nothing a call depends on is hidden in the process.
//
// A Workspace holds
//  * per pool slot (the thread_index a ThreadPool job hands each part) a
//    WorkerScratch: the buffers a kernel uses inside one piece of work (a
//    GemmFn call, an attention item, a group of prepared activations). A
//    slot runs on one thread at a time (thread_pool.h), so its buffers need
//    no lock, whichever OS thread runs it;
//  * per activation format the prepared activations of a MatMul(Many),
//    written by the dispatching call and read by every slot.
// Buffers grow on demand and never shrink; each is 64-byte aligned. What a
// buffer holds between uses means nothing: a kernel writes what it reads.
//
// Thread rules: one MatMul / Attention call at a time per Workspace (the
// same rule as for its pool). Reserve and Activations run on the
// dispatching thread; Slot(i) for different i from different threads.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "base/aligned_vector.h"
#include "base/check.h"

namespace tern::kernels {

struct ActFormat;

// The buffers of a WorkerScratch, one per use, so that buffers a kernel
// holds at once never share memory.
enum class ScratchBuf : int {
  kFloatPark,       // x86 float gemm: accumulators parked between K blocks
  kFloatTile,       // x86 16-bit float gemm: a tile group's K block converted to f32
  kAttnDecoded,     // AttendGroupGeneric: a K or V head row decoded to f32
  kAttnRows,        // x86 attend_group: a bundle's output rows
  kAttnQueryPairs,  // x86 attend_group (AVX-512): the queries in pairs
  kAttnKRows,       // x86 attend_group: 8 K rows in f32
  kAttnVTile,       // x86 attend_group: a chunk's V rows in f32
  kAmxPad,          // AMX: a short last row tile padded to 16 rows
  kAmxAcc,          // AMX: the accumulators of a row tile's token groups
  kAmxRowScales,    // AMX legacy formats: a row tile's block scales and mins
  kAmxUnpacked,     // AMX legacy formats: a row tile's nibbles unpacked
  kAmxKTile,        // AMX K-quants: a row tile unpacked
  kAmxQuantRows,    // AMX activation preparation: a token group's 8-bit rows
  kQ4Panel,         // x86 Q4_0/Q8_0 (and K-quants, AVX-512): 16 (AVX-512) or 8 (AVX2) rows unpacked, rows in the lanes
  kQ4Pad,           // x86 Q4_0/Q8_0: a short last row tile padded to 16 (or 8) rows
  kAttnQueryQ8,     // attention: the queries in 8 bits (Q8_0 / Q4_0 K scores)
  kCount
};

// One pool slot's scratch.
class alignas(64) WorkerScratch {
 public:
  // Buffer `buf` with room for at least n T's (T trivially copyable),
  // 64-byte aligned. Growing keeps the old bytes and zeroes the new ones.
  // Always inlined, so each SIMD file compiles it with its own flags and no
  // shared out-of-line copy carries any file's ISA.
  template <typename T>
  [[gnu::always_inline]] inline T* Get(ScratchBuf buf, int64_t n) {
    AlignedVector<uint8_t>& b = bufs_[(int)buf];
    const size_t bytes = (size_t)n * sizeof(T);
    if (b.size() < bytes) Grow(buf, bytes);
    return reinterpret_cast<T*>(b.data());
  }
  // Bytes held by all buffers (tests, memory accounting).
  int64_t BytesHeld() const;

 private:
  // Out of line (workspace.cc, built without ISA flags): the SIMD files
  // that call Get never emit a std::vector growth of their own.
  void Grow(ScratchBuf buf, size_t bytes);

  AlignedVector<uint8_t> bufs_[(int)ScratchBuf::kCount];
};

class Workspace {
 public:
  Workspace() = default;
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;

  // Makes slots [0, num_slots) exist (a dispatch reserves its pool's
  // num_threads() before the pool runs).
  void Reserve(int num_slots);
  int num_slots() const { return (int)slots_.size(); }
  // Slot `slot`'s scratch (slot < num_slots()).
  WorkerScratch& Slot(int slot) {
    DCHECK_LT(slot, (int)slots_.size());
    return *slots_[slot];
  }
  // The buffer for activations prepared in `format`. A fixed set of
  // buffers, one per format: none moves while a MatMulMany holds the rows
  // of several formats.
  AlignedVector<uint8_t>& Activations(const ActFormat* format);
  // Bytes held by every buffer (tests, memory accounting).
  int64_t BytesHeld() const;

  static constexpr int kMaxActFormats = 32;

 private:
  struct ActBuffer {
    const ActFormat* format = nullptr;
    AlignedVector<uint8_t> bytes;
  };
  std::vector<std::unique_ptr<WorkerScratch>> slots_;
  ActBuffer act_[kMaxActFormats];
};

}  // namespace tern::kernels
