#!/usr/bin/env python3
"""Quantized-dot fidelity of one quantized GGUF file, for tern and for
llama.cpp, against exact math on the file's dequantized weights.

  fidelity.py EXACT.lpf TERN.lpf LLAMA.kld [--label NAME] [--margin 0.1]

EXACT.lpf: `tern perplexity --save-logits` on the file dequantized to F32
(`tern quantize FILE OUT F32 --pure`); TERN.lpf: the same on the file itself;
LLAMA.kld: `llama-perplexity --kl-divergence-base` on the file itself (the
same text, -c and --chunks). Prints one row: scored positions, mean and max
|delta log-prob| over the whole vocabulary, and the top-1 flips among the
positions whose exact top-1 margin (top-1 minus top-2 log-prob) exceeds
--margin, for each engine. The |delta| statistics count the entries within
15 of the exact top log-prob (llama.cpp's file clamps everything more than
16 below its own top to one value). Log-probabilities, not raw logits: both files
store log-softmax rows (a logit shift common to a row cancels).
See scripts/fidelity.sh for the whole run.
"""
import argparse
import array
import struct
import sys


def read_tern(path):
    with open(path, 'rb') as f:
        data = f.read()
    if data[:8] != b'TERNLPF1':
        sys.exit(f'{path}: not a tern log-prob file (magic {data[:8]!r})')
    n_vocab, ctx, n_pos = struct.unpack_from('<IIQ', data, 8)
    off = 24
    tokens = array.array('i', data[off:off + 4 * n_pos])
    off += 4 * n_pos
    rows = array.array('f', data[off:off + 4 * n_pos * n_vocab])
    if len(rows) != n_pos * n_vocab:
        sys.exit(f'{path}: truncated ({len(rows)} of {n_pos * n_vocab} values)')
    return n_vocab, ctx, list(tokens), rows


def read_llama(path):
    """llama-perplexity's --kl-divergence-base file: '_logits_', n_ctx,
    n_vocab, n_chunk, the tokens, then per chunk n_ctx - 1 - n_ctx/2 rows of
    (float scale, float min_log_prob, n_vocab uint16 q) padded to nv uint16:
    log-prob = min_log_prob + scale * q."""
    with open(path, 'rb') as f:
        data = f.read()
    if data[:8] != b'_logits_':
        sys.exit(f'{path}: not a llama-perplexity logits file')
    n_ctx, n_vocab, n_chunk = struct.unpack_from('<iii', data, 8)
    off = 20
    tokens = array.array('i', data[off:off + 4 * n_chunk * n_ctx])
    off += 4 * n_chunk * n_ctx
    first = n_ctx // 2
    per_chunk = n_ctx - 1 - first
    nv = 2 * ((n_vocab + 1) // 2) + 4
    scored = []
    rows = array.array('f')
    for c in range(n_chunk):
        for i in range(per_chunk):
            scale, min_lp = struct.unpack_from('<ff', data, off)
            q = array.array('H', data[off + 8:off + 8 + 2 * n_vocab])
            off += 2 * nv
            rows.extend(min_lp + scale * v for v in q)
            scored.append(tokens[c * n_ctx + first + 1 + i])
    return n_vocab, n_ctx, scored, rows


def top2(row, base, n):
    best = second = -1e30
    arg = -1
    for i in range(n):
        v = row[base + i]
        if v > best:
            second, best, arg = best, v, i
        elif v > second:
            second = v
    return arg, best - second


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('exact')
    ap.add_argument('tern')
    ap.add_argument('llama')
    ap.add_argument('--label', default='')
    ap.add_argument('--margin', type=float, default=0.1)
    a = ap.parse_args()
    nv, ctx, tok_e, exact = read_tern(a.exact)
    nv_t, ctx_t, tok_t, tern = read_tern(a.tern)
    nv_l, ctx_l, tok_l, llama = read_llama(a.llama)
    if (nv_t, ctx_t, tok_t) != (nv, ctx, tok_e):
        sys.exit('tern run and exact run differ (vocabulary, context or scored tokens)')
    if nv_l != nv or ctx_l != ctx:
        sys.exit(f'llama run: vocabulary {nv_l} / context {ctx_l}, exact run: {nv} / {ctx}')
    n = min(len(tok_e), len(tok_l))
    if tok_l[:n] != tok_e[:n]:
        k = next(i for i in range(n) if tok_l[i] != tok_e[i])
        sys.exit(f'llama run scores other tokens: first difference at position {k}: '
                 f'{tok_l[k]} vs {tok_e[k]} (tokenizer or chunking differs)')
    stats = {}
    for name, run in (('tern', tern), ('llama.cpp', llama)):
        total = 0.0
        counted = 0
        worst = 0.0
        confident = flips = 0
        for p in range(n):
            b = p * nv
            arg_e, margin = top2(exact, b, nv)
            floor = exact[b + arg_e] - 15.0
            for i in range(nv):
                if exact[b + i] < floor:
                    continue
                d = abs(run[b + i] - exact[b + i])
                total += d
                counted += 1
                if d > worst:
                    worst = d
            if margin > a.margin:
                confident += 1
                arg_r, _ = top2(run, b, nv)
                if arg_r != arg_e:
                    flips += 1
        stats[name] = (total / max(counted, 1), worst, confident, flips)
    t, l = stats['tern'], stats['llama.cpp']
    print(f"| {a.label} | {n} | {t[0]:.4f} / {l[0]:.4f} | {t[1]:.3f} / {l[1]:.3f} | {t[2]} | "
          f"{t[3]} ({100 * t[3] / max(t[2], 1):.2f}%) / {l[3]} ({100 * l[3] / max(l[2], 1):.2f}%) |")


if __name__ == '__main__':
    main()
