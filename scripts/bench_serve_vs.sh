#!/usr/bin/env bash
# Serving comparison of docs/engine.md ("Measured"): `tern serve` and
# llama.cpp's llama-server on the same GGUF file and thread count, alternated,
# loaded by `tern bench serve` (closed loop, Poisson, shared prefix, one long
# prompt among decodes), plus a sweep of tern's --target-itl-ms.
#
#   MODEL=/tmp/tl_q4_0.gguf LLAMA_SERVER=/path/to/llama-server \
#     scripts/bench_serve_vs.sh [unique|prefix|poisson|long|sweep|all] [ROUNDS]
#
# Results (JSON + SVG per run) go to $OUT (default /tmp/tern-serve-vs); each
# run prints one summary line. Without LLAMA_SERVER only tern runs.
# TERN_SERVE_FLAGS adds flags to every `tern serve` (e.g.
# "--target-itl-factor 2"); TAG adds a suffix to the labels; SERVERS="tern"
# or "llama" runs one side only.
set -euo pipefail
cd "$(dirname "$0")/.."
TERN=${TERN:-./build/tern}
MODEL=${MODEL:-/tmp/tl_q4_0.gguf}
THREADS=${THREADS:-2}
OUT=${OUT:-/tmp/tern-serve-vs}
PORT=${PORT:-18080}
WHAT=${1:-all}
ROUNDS=${2:-2}
LLAMA_SERVER=${LLAMA_SERVER:-}
mkdir -p "$OUT"
[ -f "$MODEL" ] || "$TERN" model synth --preset tinyllama-1.1b --type Q4_0 --ctx 4096 -o "$MODEL" >&2

SERVER_PID=
start_server() {  # name [extra tern flags...]
  local name=$1; shift
  if [ "$name" = tern ]; then
    "$TERN" serve -m "$MODEL" -t "$THREADS" --port "$PORT" --max-num-seqs 64 --kv-cache-memory 2GiB ${TERN_SERVE_FLAGS:-} "$@" \
      >"$OUT/server-$name.log" 2>&1 &
  else
    "$LLAMA_SERVER" -m "$MODEL" -t "$THREADS" --port "$PORT" -np 16 -fa on -c 65536 \
      >"$OUT/server-$name.log" 2>&1 &
  fi
  SERVER_PID=$!
  for _ in $(seq 600); do
    curl -sf "http://127.0.0.1:$PORT/health" >/dev/null 2>&1 && return 0
    sleep 0.5
  done
  echo "server $name did not start" >&2; return 1
}
stop_server() {
  kill "$SERVER_PID" 2>/dev/null || true
  wait "$SERVER_PID" 2>/dev/null || true
}

bench() {  # label [bench serve flags...]
  local label=$1${TAG:-}; shift
  "$TERN" bench serve -m "$MODEL" --base-url "http://127.0.0.1:$PORT" --ignore-eos --seed 1 \
    --label "$label" --save-result "$OUT/$label.json" "$@" >"$OUT/$label.txt" 2>"$OUT/$label.err" || true
  python3 - "$OUT/$label.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
print(f"{j['label']:<28} ok {j['completed']:>3} fail {j['failed']:>2}  "
      f"{j['output_throughput']:7.2f} tok/s  goodput {j['request_goodput']:.3f} req/s  "
      f"TTFT p50 {j['median_ttft_ms']:8.0f} p90 {j['p90_ttft_ms']:8.0f} p99 {j['p99_ttft_ms']:8.0f} ms  "
      f"TPOT p50 {j['median_tpot_ms']:6.0f}  ITL p50 {j['median_itl_ms']:6.0f} p99 {j['p99_itl_ms']:7.0f} max {j['max_itl_ms']:7.0f}  "
      f"E2E p50 {j['median_e2el_ms']:8.0f}")
PY
}

servers() {  # SERVERS="llama" runs one side only
  if [ -n "${SERVERS:-}" ]; then echo "$SERVERS"; return; fi
  echo tern; [ -n "$LLAMA_SERVER" ] && echo llama || true
}

unique() { bench "$1-unique-r$2" --num-prompts 64 --random-input-len 256 --random-output-len 64 \
  --max-concurrency 16; }
prefix() { bench "$1-prefix-r$2" --dataset-name prefix-repetition --num-prompts 48 \
  --prefix-repetition-prefix-len 1024 --prefix-repetition-suffix-len 32 \
  --prefix-repetition-num-prefixes 1 --prefix-repetition-output-len 64 --max-concurrency 16; }
poisson() {  # rate = 80% of tern's closed-loop request throughput (RATE overrides)
  local rate=${RATE:-$(python3 -c "import json;print(round(0.8*json.load(open('$OUT/tern-unique-r1.json'))['request_throughput'],3))")}
  bench "$1-poisson-r$2" --num-prompts 64 --random-input-len 256 --random-output-len 64 \
    --request-rate "$rate" --goodput ttft:2000 tpot:150
}
long() {  # 8 decodes, then one 2048-token prompt; the decodes' ITL
  "$TERN" bench serve -m "$MODEL" --base-url "http://127.0.0.1:$PORT" --ignore-eos --seed 2 \
    --num-prompts 8 --random-input-len 32 --random-output-len 256 --skip-test-request \
    --label "$1-long-decodes-r$2" --save-result "$OUT/$1-long-decodes-r$2.json" \
    >/dev/null 2>&1 &
  local decodes=$!
  sleep 5
  bench "$1-long-prompt-r$2" --num-prompts 1 --random-input-len 2048 --random-output-len 4 \
    --skip-test-request
  wait "$decodes" || true
  python3 - "$OUT/$1-long-decodes-r$2.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
print(f"{j['label']:<28} decodes' ITL median {j['median_itl_ms']:.0f} ms, max {j['max_itl_ms']:.0f} ms, "
      f"max/median {j['max_itl_ms'] / max(j['median_itl_ms'], 1e-9):.2f}")
PY
}

for round in $(seq "$ROUNDS"); do
  for s in $(servers); do
    for what in unique prefix poisson long; do
      [ "$WHAT" = all ] || [ "$WHAT" = "$what" ] || continue
      start_server "$s"
      "$what" "$s" "$round"
      stop_server
    done
  done
done
if [ "$WHAT" = all ] || [ "$WHAT" = sweep ]; then
  for target in 50 100 200 400 800; do
    start_server tern --target-itl-ms "$target"
    unique "tern-itl$target" 1
    stop_server
  done
fi
