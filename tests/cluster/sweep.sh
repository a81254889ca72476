#!/usr/bin/env bash
# Compares HAProxy routing settings on the cluster test's workload, seed by
# seed (a manual tool, not a ctest; docs/deploy.md has its last table):
#
#   tests/cluster/sweep.sh [OUT_DIR]
#
# For each seed in SEEDS (default "1 2 3 4 5"; the seed picks the prompts, their
# shuffle and the arrival times) and each mode in MODES (default "roundrobin
# sticky hash:150 hash:125", run in that order, each on a fresh cluster), runs
# the workload of tests/cluster/run.sh: 8 distinct 512-token prefixes x 16
# requests, 16-token user parts, 8 output tokens, Poisson arrivals at 50 req/s,
# at most 12 in flight, 3 instances of stories260K with 1 thread and 2 MiB of
# KV each. Prints one row per seed and mode: the pooled prefix-cache hit rate,
# TTFT p50 and its ratio to round robin's of the same seed (run just before),
# the busiest instance's requests over the mean and its requests in flight
# over the mean. Saves each run's `bench serve` JSON in OUT_DIR.
#
# Env: TERN_BINARY, TERN_MODELS_DIR, SEEDS, MODES, KV_CACHE_MEMORY (2MiB).
set -uo pipefail
unset TERN_API_KEY

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
binary="${TERN_BINARY:-$repo/build/tern}"
model="${TERN_MODELS_DIR:-$repo/../shared/models}/stories260K.gguf"
seeds="${SEEDS:-1 2 3 4 5}"
modes="${MODES:-roundrobin sticky hash:150 hash:125}"
out="${1:-$(mktemp -d -t tern-cluster-sweep.XXXXXX)}"
mkdir -p "$out" || exit 1
[[ -f "$model" ]] || { echo "sweep: model $model not found" >&2; exit 1; }
[[ -x "$binary" ]] || { echo "sweep: tern binary not found at $binary" >&2; exit 1; }

export RUN_DIR="$out/run" TERN="$binary" MODEL="$model"
trap '"$repo/scripts/cluster.sh" down --run-dir "$RUN_DIR" >/dev/null 2>&1' EXIT
trap 'exit 130' INT TERM

for seed in $seeds; do
  for mode in $modes; do
    balance=${mode%%:*}
    factor=150
    [[ "$mode" == *:* ]] && factor=${mode#*:}
    "$repo/scripts/cluster.sh" up -n 3 -t 1 --port 0 --stats-port 0 --base-port 0 \
      --kv-cache-memory "${KV_CACHE_MEMORY:-2MiB}" --balance "$balance" \
      --balance-factor "$factor" >"$out/up.log" 2>&1 || { cat "$out/up.log" >&2; exit 1; }
    # shellcheck disable=SC1091
    source "$RUN_DIR/cluster.env"
    "$binary" bench serve --tokenizer "$model" --base-url "$FRONT_URL" \
      --dataset-name prefix-repetition --prefix-repetition-prefix-len 512 \
      --prefix-repetition-suffix-len 16 --prefix-repetition-num-prefixes 8 \
      --prefix-repetition-output-len 8 --num-prompts 128 --request-rate 50 --max-concurrency 12 \
      --ignore-eos --seed "$seed" --instance-metrics "$INSTANCE_URLS" \
      --save-result "$out/$mode-$seed.json" >"$out/$mode-$seed.txt" 2>&1 ||
      { cat "$out/$mode-$seed.txt" >&2; echo "sweep: bench failed ($mode, seed $seed)" >&2; }
    "$repo/scripts/cluster.sh" down --run-dir "$RUN_DIR" >/dev/null
  done
done

python3 - "$out" "$seeds" "$modes" <<'EOF'
import json, os, sys
out, seeds, modes = sys.argv[1], sys.argv[2].split(), sys.argv[3].split()
def load(mode, seed):
    p = os.path.join(out, "%s-%s.json" % (mode, seed))
    return json.load(open(p)) if os.path.exists(p) else None
print("| seed | mode | hit rate | TTFT p50 ms | RR/this TTFT | requests per instance | busiest/mean requests | busiest/mean in flight | failed |")
print("|---|---|---|---|---|---|---|---|---|")
for seed in seeds:
    rr = load("roundrobin", seed)
    for mode in modes:
        j = load(mode, seed)
        if j is None:
            print("| %s | %s | (no result) |||||||" % (seed, mode))
            continue
        ratio = rr["median_ttft_ms"] / j["median_ttft_ms"] if rr and j["median_ttft_ms"] > 0 else float("nan")
        print("| %s | %s | %.1f%% | %.1f | %.2fx | %s | %.2f | %.2f | %d |" % (
            seed, mode, 100 * j["prefix_cache_hit_rate"], j["median_ttft_ms"], ratio,
            "/".join("%d" % i["requests"] for i in j["instances"]),
            j["instance_max_over_mean"], j["instance_in_flight_max_over_mean"], j["failed"]))
EOF
echo "sweep: results in $out"
