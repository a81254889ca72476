#!/usr/bin/env bash
# Engine benchmarks of docs/benchmarks.md (serving-engine and prefix-caching
# sections), driven through `tern batch` on synthetic models.
#
#   [TYPE=q4_k] scripts/bench_engine.sh [batch|chunked|prefix|all] [stories110m|tinyllama-1.1b]
#
# Models are generated under $BENCH_DIR (default /tmp/tern-bench), never in
# the repo. Each section prints a small table; the numbers of one run are
# comparable with each other (same minutes, same machine state).
set -euo pipefail
cd "$(dirname "$0")/.."
TERN=${TERN:-./build/tern}
BENCH_DIR=${BENCH_DIR:-/tmp/tern-bench}
WHAT=${1:-all}
PRESET=${2:-stories110m}
THREADS=${THREADS:-2}
TYPE=${TYPE:-q4_0}  # weight type of the synthetic models
mkdir -p "$BENCH_DIR"

model_for() {  # preset type -> path (synthesized once)
  local path="$BENCH_DIR/$1-$2.gguf"
  [ -f "$path" ] || "$TERN" model synth --preset "$1" --type "$2" --ctx 4096 -o "$path" 2>/dev/null >&2
  echo "$path"
}

# N requests of P prompt tokens (distinct random ids) and G output tokens;
# optional shared prefix of S tokens; optional arrival of the last request.
make_prompts() {  # n p g shared_prefix long_last_tokens long_arrival_ms
  python3 - "$@" <<'PY'
import json, random, sys
n, p, g, shared, long_len, long_arrival = map(int, sys.argv[1:7])
rng = random.Random(1234)
prefix = [rng.randrange(300, 30000) for _ in range(shared)]
for i in range(n):
    ids = [1] + prefix + [rng.randrange(300, 30000) for _ in range(p)]
    print(json.dumps({"id": i, "prompt": ids, "max_tokens": g, "temperature": 0, "ignore_eos": True}))
if long_len:
    ids = [1] + [rng.randrange(300, 30000) for _ in range(long_len - 1)]
    print(json.dumps({"id": "long", "prompt": ids, "max_tokens": 4, "temperature": 0,
                      "ignore_eos": True, "arrival_ms": long_arrival}))
PY
}

json_field() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2], {}, {'d': d}))" "$@"; }

bench_batch() {  # aggregate output tok/s at max-num-seqs 1, 4, 16, 64
  local model; model=$(model_for "$PRESET" "$TYPE")
  echo "## tern batch, $PRESET ${TYPE^^}, 16 prompt + 128 output tokens, ignore_eos, $THREADS threads"
  echo "| max-num-seqs | requests | output tok/s | speed-up vs 1 |"
  echo "|---|---|---|---|"
  local base=""
  for seqs in 1 4 16 64; do
    local n=64
    # A single sequence runs one request after another: fewer requests give
    # the same rate in less time on the big shape.
    if [ "$PRESET" = tinyllama-1.1b ] && [ $seqs -lt 16 ]; then n=$((seqs * 4)); fi
    make_prompts $n 16 128 0 0 0 > "$BENCH_DIR/batch.jsonl"
    "$TERN" batch -m "$model" -t "$THREADS" -i "$BENCH_DIR/batch.jsonl" -o "$BENCH_DIR/batch.out" \
      --max-num-seqs $seqs --summary-json "$BENCH_DIR/batch.json" 2>/dev/null
    local tps; tps=$(json_field "$BENCH_DIR/batch.json" 'round(d["output_tokens_per_s"], 1)')
    [ -n "$base" ] || base=$tps
    echo "| $seqs | $n | $tps | $(python3 -c "print(round($tps/$base, 2))")x |"
  done
}

bench_chunked() {  # 8 running decodes, then a 2048-token prompt arrives
  # Modes: chunked with the automatic decode protection (the default), chunked
  # without it (prefill cap = the whole budget), whole prompts. TTFT of the
  # long prompt counts from its arrival. A fixed 512 MiB KV cache (the run
  # needs < 100 MiB): the default sizes it from free memory and touching
  # ~10 GiB of it costs seconds of system time and slows the steps.
  local model; model=$(model_for "$PRESET" "$TYPE")
  echo "## chunked prefill, $PRESET ${TYPE^^}: 8 decodes (128 tokens) + a 2048-token prompt arriving at 1 s, --max-num-batched-tokens 256"
  echo "| mode | decodes' median ITL (ms) | ITL p90 (ms) | decodes' max ITL (ms) | max / median | long prompt TTFT (ms) |"
  echo "|---|---|---|---|---|---|"
  make_prompts 8 16 128 0 2048 1000 > "$BENCH_DIR/chunk.jsonl"
  local modes=("on:--enable-chunked-prefill"
               "on, no decode cap:--enable-chunked-prefill --max-prefill-tokens-while-decoding 256"
               "off:--no-enable-chunked-prefill")
  for m in "${modes[@]}"; do
    local name=${m%%:*} flags=${m#*:}
    # shellcheck disable=SC2086
    "$TERN" batch -m "$model" -t "$THREADS" -i "$BENCH_DIR/chunk.jsonl" -o "$BENCH_DIR/chunk.out" \
      --max-model-len 4096 --max-num-batched-tokens 256 --kv-cache-memory 512MiB $flags \
      --summary-json "$BENCH_DIR/chunk.json" 2>/dev/null
    python3 - "$BENCH_DIR/chunk.out" "$name" "$BENCH_DIR/chunk.json" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
p90 = json.load(open(sys.argv[3]))["itl_ms"]["p90"]  # all requests: ~all decodes
dec = [r for r in rows if r["id"] != "long"]
long = [r for r in rows if r["id"] == "long"][0]
med = sorted(r["timings"]["itl_p50_ms"] for r in dec)[len(dec) // 2]
mx = max(r["timings"]["itl_max_ms"] for r in dec)
print(f"| {sys.argv[2]} | {med:.1f} | {p90:.1f} | {mx:.1f} | {mx/med:.2f} | {long['timings']['ttft_ms']:.0f} |")
PY
  done
  # The same prompt alone: nothing decodes, so the protection must not cost TTFT.
  echo
  echo "| lone 2048-token prompt | TTFT (ms) |"
  echo "|---|---|"
  make_prompts 0 0 0 0 2048 0 > "$BENCH_DIR/chunk-lone.jsonl"
  for m in "on:--enable-chunked-prefill" "off:--no-enable-chunked-prefill"; do
    # shellcheck disable=SC2086
    "$TERN" batch -m "$model" -t "$THREADS" -i "$BENCH_DIR/chunk-lone.jsonl" -o "$BENCH_DIR/chunk.out" \
      --max-model-len 4096 --max-num-batched-tokens 256 --kv-cache-memory 512MiB ${m#*:} 2>/dev/null
    python3 -c "import json,sys; r=json.loads(open(sys.argv[1]).readline()); print(f'| {sys.argv[2]} | {r[\"timings\"][\"ttft_ms\"]:.0f} |')" \
      "$BENCH_DIR/chunk.out" "${m%%:*}"
  done
}

bench_prefix() {  # 32 requests sharing a 1024-token system prompt
  local model; model=$(model_for "$PRESET" "$TYPE")
  echo "## prefix caching, $PRESET ${TYPE^^}: 32 requests = shared 1024-token prefix + 32 unique tokens, 32 output tokens"
  echo "| prefix cache | requests | mean TTFT of requests 2.. (ms) | hit rate | total s |"
  echo "|---|---|---|---|---|"
  make_prompts 32 32 32 1024 0 0 > "$BENCH_DIR/prefix.jsonl"
  # Without the cache every request computes its whole prompt; at
  # max-num-seqs 1 each such prefill is independent, so NOCACHE_REQUESTS
  # (default 32) may be cut to save time on big shapes.
  head -n "${NOCACHE_REQUESTS:-32}" "$BENCH_DIR/prefix.jsonl" > "$BENCH_DIR/prefix-nocache.jsonl"
  for mode in --enable-prefix-caching --no-enable-prefix-caching; do
    local input="$BENCH_DIR/prefix.jsonl"
    [ "$mode" = --enable-prefix-caching ] || input="$BENCH_DIR/prefix-nocache.jsonl"
    local t0 t1; t0=$(date +%s.%N)
    # max-num-seqs 1: requests run one after another, so request 1 computes
    # the prefix and the others find it (the arrival order of a server).
    "$TERN" batch -m "$model" -t "$THREADS" -i "$input" -o "$BENCH_DIR/prefix.out" \
      --max-num-seqs 1 --max-num-batched-tokens 512 $mode --summary-json "$BENCH_DIR/prefix.json" 2>/dev/null
    t1=$(date +%s.%N)
    python3 - "$BENCH_DIR/prefix.out" "$BENCH_DIR/prefix.json" "$mode" "$t0" "$t1" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
s = json.load(open(sys.argv[2]))
# TTFT without the queueing behind earlier requests: the request's own prefill.
ttft = [r["timings"]["ttft_ms"] - r["timings"]["queue_ms"] for r in rows[1:]]
on = "no-" not in sys.argv[3]
print(f"| {'on' if on else 'off'} | {len(rows)} | {sum(ttft)/len(ttft):.0f} | {s.get('prefix_cache_hit_rate', 0)*100:.1f}% | {float(sys.argv[5])-float(sys.argv[4]):.1f} |")
PY
  done
}

case "$WHAT" in
  batch) bench_batch ;;
  chunked) bench_chunked ;;
  prefix) bench_prefix ;;
  all) bench_batch; bench_chunked; bench_prefix ;;
  *) echo "usage: $0 [batch|chunked|prefix|all] [stories110m|tinyllama-1.1b]" >&2; exit 1 ;;
esac
