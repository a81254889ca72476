#!/usr/bin/env bash
# Offline batched generation, side by side: `tern batch` at 16 sequences and
# llama.cpp's llama-batched-bench -npp 16 -ntg 64 -npl 16, on the same GGUF
# file and thread count, run alternated (tern, llama, tern, llama, ...; one
# at a time). docs/benchmarks.md "Batched: tern batch vs llama-batched-bench".
#
#   scripts/bench_batched_vs.sh MODEL LLAMA_BIN_DIR [ROUNDS]
#
# LLAMA_BIN_DIR holds an existing llama.cpp build's llama-batched-bench (this
# script only runs it); empty ("") runs tern alone. THREADS (default 2),
# TERN (default ./build/tern), OUT (default /tmp/tern-batched-vs) and
# TERN_FLAGS (extra `tern batch` flags, e.g. "--scheduling-policy
# decode-protect") can be set in the environment. QUIET=1 waits before each
# run (up to QUIET_MAX seconds, default 120) until no other task has been
# runnable for 3 s: on a shared machine llama-batched-bench's spinning
# threads slow down many times over when another process takes a core
# (tern's much less), so only quiet rounds give a fair ratio.
#
# The work: 32 requests of 16 prompt tokens and 64 output tokens for tern
# (two waves of 16 at --max-num-seqs 16), 16 sequences of 16 prompt tokens
# and 64 decode steps for llama-batched-bench (one wave). Prompts are token
# ids drawn at random per request (ids 100..min(vocab, 32000)-1, seeded), so
# no prompt shares a prefix with another (no prefix-cache hit); tern decodes
# greedily with ignore_eos, every request exactly 64 tokens.
#
# How each side is counted: output tokens / wall time of the whole run,
# prefill included, model load excluded.
#   tern:  output_tokens / elapsed_s of `tern batch --summary-json`: the clock
#          starts when the requests are submitted (after the model is loaded
#          and the prompts tokenized) and stops when the last request ends;
#          it includes every prefill, decode, sampling and detokenization.
#   llama: 16 x 64 / T, T = T_PP + T_TG of its table (its warm-up decode and
#          model load are outside T). Its run decodes 64 steps after the
#          prompt, one more than tern's 63 (tern's first output token comes
#          from the prompt's step), so llama's T holds the work of 65 tokens
#          a sequence; counting 64 is what the acceptance point says, and the
#          "65" column shows llama credited with 65 (the ratio against it is
#          the conservative one).
# Decode alone: llama's S_TG (16 x 64 / T_TG) and tern's median step time of
# the steps that decode 16 sequences and compute no prompt token (from
# --step-log), as 16 / that step time.
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL=${1:?usage: bench_batched_vs.sh MODEL LLAMA_BIN_DIR [ROUNDS]}
LLAMA_BIN=${2-}
ROUNDS=${3:-3}
TERN=${TERN:-./build/tern}
THREADS=${THREADS:-2}
OUT=${OUT:-/tmp/tern-batched-vs}
NPL=16 NPP=16 NTG=64 NREQ=32
mkdir -p "$OUT"
RESULTS="$OUT/results-$(date -u +%Y%m%dT%H%M%S).txt"
[ -f "$MODEL" ] || { echo "no model file $MODEL" >&2; exit 1; }
if [ -n "$LLAMA_BIN" ] && [ ! -x "$LLAMA_BIN/llama-batched-bench" ]; then
  echo "no llama-batched-bench in $LLAMA_BIN" >&2; exit 1
fi

VOCAB=$("$TERN" inspect "$MODEL" | awk '/vocab_size/ && !v {v = $NF} END {print v}')
VOCAB=${VOCAB:-32000}
python3 - "$OUT/requests.jsonl" "$VOCAB" "$NREQ" "$NPP" "$NTG" <<'PY'
import json, random, sys
path, vocab, nreq, npp, ntg = sys.argv[1], int(sys.argv[2]), *map(int, sys.argv[3:])
rng = random.Random(1)
hi = min(vocab, 32000)
with open(path, "w") as f:
    for i in range(nreq):
        prompt = [rng.randrange(100, hi) for _ in range(npp)]
        f.write(json.dumps({"id": i, "prompt": prompt, "max_tokens": ntg,
                            "temperature": 0, "ignore_eos": True}) + "\n")
PY

# Runs a command, its stdout and stderr to $1; appends to $1.cpu the CPUs
# the rest of the machine used meanwhile (all CPUs' busy time less this
# command's own, over its wall time) and the steal (time the hypervisor
# gave to other guests).
measured() {  # LOG CMD...
  local log=$1; shift
  python3 - "$log" "$@" <<'PY'
import os, resource, subprocess, sys, time
def busy():
    f = [int(x) for x in open("/proc/stat").readline().split()[1:]]
    hz = os.sysconf("SC_CLK_TCK")
    return (f[0] + f[1] + f[2] + f[5] + f[6]) / hz, f[7] / hz  # user nice system irq softirq; steal
b0, s0 = busy(); t0 = time.time()
with open(sys.argv[1], "w") as out:
    rc = subprocess.call(sys.argv[2:], stdout=out, stderr=subprocess.STDOUT)
wall = time.time() - t0; b1, s1 = busy()
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
others = max(0.0, (b1 - b0) - (ru.ru_utime + ru.ru_stime)) / wall
with open(sys.argv[1] + ".cpu", "w") as f:
    f.write(f"others {others:.2f} CPUs, steal {(s1 - s0) / wall:.2f}\n")
sys.exit(rc)
PY
}

wait_quiet() {  # QUIET=1: until only this check runs, 3 s in a row (QUIET_MAX s at most)
  [ "${QUIET:-0}" = 1 ] || return 0
  local calm=0
  for _ in $(seq "${QUIET_MAX:-120}"); do
    # /proc/loadavg's 4th field: runnable tasks / all; the reader itself is 1.
    if [ "$(cut -d' ' -f4 /proc/loadavg | cut -d/ -f1)" -le 1 ]; then
      calm=$((calm + 1)); [ "$calm" -ge 3 ] && return 0
    else
      calm=0
    fi
    sleep 1
  done
}

run_tern() {  # round
  local tag="$OUT/tern-r$1"
  rm -f "$tag.steps.jsonl"
  measured "$tag.log" "$TERN" batch -m "$MODEL" -i "$OUT/requests.jsonl" -o "$tag.out.jsonl" \
    --max-num-seqs "$NPL" -t "$THREADS" --summary-json "$tag.summary.json" \
    --step-log "$tag.steps.jsonl" ${TERN_FLAGS:-}
  python3 - "$tag.summary.json" "$tag.steps.jsonl" "$NPL" "$tag.log.cpu" <<'PY'
import json, statistics, sys
s = json.load(open(sys.argv[1]))
npl = int(sys.argv[3])
steps = [json.loads(l) for l in open(sys.argv[2])]
dec = [x["duration_ms"] for x in steps if x["batch_size"] == npl and x["prefill_tokens"] == 0]
step_ms = statistics.median(dec) if dec else float("nan")
print(f"tern  {s['output_tokens_per_s']:8.1f} out tok/s  ({s['output_tokens']} tokens in "
      f"{s['elapsed_s']:.3f} s, {len(steps)} steps)  decode step at {npl}: {step_ms:6.2f} ms "
      f"= {1e3 * npl / step_ms:7.1f} tok/s  [{open(sys.argv[4]).read().strip()}]")
PY
}

run_llama() {  # round
  local tag="$OUT/llama-r$1"
  measured "$tag.log" "$LLAMA_BIN/llama-batched-bench" -m "$MODEL" -npp "$NPP" -ntg "$NTG" \
    -npl "$NPL" -t "$THREADS" -c $((2 * NPL * (NPP + NTG)))
  python3 - "$tag.log" "$NPL" "$NTG" "$tag.log.cpu" <<'PY'
import sys
npl, ntg = int(sys.argv[2]), int(sys.argv[3])
for line in open(sys.argv[1]):
    cols = [c.strip() for c in line.strip().strip("|").split("|")]
    if len(cols) == 10 and cols[0].isdigit():
        t_pp, t_tg, s_tg, t = float(cols[4]), float(cols[6]), float(cols[7]), float(cols[8])
        print(f"llama {npl * ntg / t:8.1f} out tok/s  ({npl * ntg} tokens in {t:.3f} s; "
              f"65: {npl * (ntg + 1) / t:7.1f})  T_PP {t_pp:.3f} s  S_TG {s_tg:7.1f} tok/s  "
              f"[{open(sys.argv[4]).read().strip()}]")
        break
else:
    print("llama: no result row in " + sys.argv[1])
PY
}

echo "# $(date -u +%FT%TZ) $MODEL, -t $THREADS, $ROUNDS rounds, load $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq "$ROUNDS"); do
  wait_quiet; run_tern "$r" | tee -a "$RESULTS"
  [ -z "$LLAMA_BIN" ] || { wait_quiet; run_llama "$r" | tee -a "$RESULTS"; }
done
echo "# done $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$RESULTS" <<'PY'
import re, statistics, sys
lines = open(sys.argv[1]).read().splitlines()
def med(name, idx=0):
    xs = [float(re.findall(r"[\d.]+", l)[idx]) for l in lines if l.startswith(name)]
    return (statistics.median(xs), min(xs), max(xs)) if xs else None
t, l = med("tern"), med("llama")
if t: print(f"tern  median {t[0]:.1f} out tok/s (range {t[1]:.1f}-{t[2]:.1f})")
if l: print(f"llama median {l[0]:.1f} out tok/s (range {l[1]:.1f}-{l[2]:.1f})")
if t and l:
    l65 = statistics.median(float(re.search(r"65: +([\d.]+)", x).group(1))
                            for x in lines if x.startswith("llama"))
    print(f"ratio tern / llama {t[0] / l[0]:.2f}x (llama credited 65 tokens a sequence: "
          f"{t[0] / l65:.2f}x)")
PY
