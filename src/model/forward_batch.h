// ForwardBatch: one flattened step of work for Model::Forward — all scheduled
// tokens of all sequences, with where their K/V go and which rows want logits.
//
//   tokens:  [ s0 t0 t1 t2 | s1 t0 | s2 t0 t1 ]   (grouped by sequence,
//   positions, slots parallel to tokens)           positions ascending)
//
// A token at position p of sequence s attends to positions [0, p] of s
// (or (p - window, p] with a sliding window); the K/V of position q live at
// slot block_table[q / block_size] * block_size + q % block_size of KvStorage.
// The batch's own tokens are written to their slots before attention reads.
//
// A KvStorage with a windowed group (hybrid models: KvShape::
// window_group_layers) has its own blocks for the windowed layers: their K/V
// go to window_slots and are read through each sequence's
// window_block_table (entries before the window may be -1: released).
// Empty window_slots: the windowed layers use slots and block_table too.
#pragma once

#include <cstdint>
#include <vector>

namespace tern {

struct ForwardSequence {
  int32_t first_token = 0;   // index of its first token in the flat arrays
  int32_t num_tokens = 0;    // tokens scheduled this step
  int32_t context_len = 0;   // tokens in KV after this step (last position + 1)
  std::vector<int32_t> block_table;  // block ids covering [0, context_len)
  std::vector<int32_t> window_block_table;  // the windowed group's (or empty)
};

struct ForwardBatch {
  std::vector<int32_t> token_ids;   // [num_tokens]
  std::vector<int32_t> positions;   // [num_tokens]
  std::vector<int64_t> slots;       // [num_tokens] KV slot to write
  std::vector<int64_t> window_slots;  // [num_tokens] in the windowed group, or empty
  std::vector<ForwardSequence> sequences;
  // Token indices whose logits are wanted; logits come out in this order.
  std::vector<int32_t> logits_rows;

  int32_t num_tokens() const { return (int32_t)token_ids.size(); }
};

}  // namespace tern
