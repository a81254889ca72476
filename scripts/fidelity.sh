#!/usr/bin/env bash
# Quantized-dot fidelity table (docs/quantization.md, "Fidelity"): for each
# quantized GGUF file, tern's and llama.cpp's log-probabilities on a text
# against exact math on the file's own weights dequantized to F32 (tern
# quantize FILE OUT F32 --pure, run by tern: f32 weights, f32 activations,
# f32 KV cache). Both engines run the quantized file with an f32 KV cache so
# that only the weight and activation quantization differ from the exact
# run. One table row per file (scripts/fidelity.py).
#
#   LLAMA_PERPLEXITY=/path/to/llama-perplexity scripts/fidelity.sh TEXT CTX CHUNKS FILE...
set -euo pipefail
cd "$(dirname "$0")/.."
TERN=${TERN:-./build/tern}
LP=${LLAMA_PERPLEXITY:?set LLAMA_PERPLEXITY to a llama-perplexity binary}
OUT=${OUT:-/tmp/tern-fidelity}
THREADS=${THREADS:-2}
TEXT=${1:?text file}
CTX=${2:?context}
CHUNKS=${3:?chunks}
shift 3
mkdir -p "$OUT"
echo "| file | positions | mean abs delta log-prob tern / llama.cpp | max tern / llama.cpp | positions with exact margin > 0.1 | top-1 flips there tern / llama.cpp |"
echo "|---|---:|---|---|---:|---|"
for file in "$@"; do
  name=$(basename "$file" .gguf)
  "$TERN" quantize "$file" "$OUT/$name-exact.gguf" F32 --pure >/dev/null 2>&1
  "$TERN" perplexity -m "$OUT/$name-exact.gguf" -f "$TEXT" -c "$CTX" --chunks "$CHUNKS" -t "$THREADS" \
    --kv-cache-dtype f32 --save-logits "$OUT/$name-exact.lpf" >/dev/null 2>&1
  "$TERN" perplexity -m "$file" -f "$TEXT" -c "$CTX" --chunks "$CHUNKS" -t "$THREADS" \
    --kv-cache-dtype f32 --save-logits "$OUT/$name-tern.lpf" >/dev/null 2>&1
  "$LP" -m "$file" -f "$TEXT" -c "$CTX" -b "$CTX" --chunks "$CHUNKS" -t "$THREADS" -ctk f32 -ctv f32 \
    --kl-divergence-base "$OUT/$name-llama.kld" >"$OUT/$name-llama.log" 2>&1
  python3 scripts/fidelity.py "$OUT/$name-exact.lpf" "$OUT/$name-tern.lpf" "$OUT/$name-llama.kld" --label "$name"
  rm -f "$OUT/$name-exact.gguf"
done
