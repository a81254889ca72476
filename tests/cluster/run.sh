#!/usr/bin/env bash
# Scale-out test (ctest -R '^cluster$'): 3 `tern serve` instances (1 thread
# each) behind HAProxy, started by scripts/cluster.sh.
#
#  1. Affinity vs round robin, alternated (B A B A, same prompts per round,
#     round r uses seed r): 8 distinct 512-token system prompts x 16 requests
#     each, shuffled, each with a 16-token user part, Poisson arrivals at
#     50 req/s, at most 12 in flight (`tern bench serve --dataset-name
#     prefix-repetition --instance-metrics`), on a random-weight model synthesized
#     here (n_embd 384, 6 layers, Q8_0, 10 MiB, stories260K's tokenizer: a
#     512-token prefill 0.03-0.1 s at 1 thread). Each instance's KV cache
#     (6 MiB, 2,048 tokens) holds about 4 of the 8 prompts 512 + 16 tokens
#     long: its share under affinity (3/3/2) and the requests in flight, so
#     round robin's hit rate stays under half (36-40%) and its median request
#     is a whole prefill, however fast the machine. Affinity instances run with --metrics-prefix vllm; their
#     /metrics must carry vLLM's names, from which bench serve reads the hit
#     rates. Asserts the issue's figures in every round: pooled prefix-cache
#     hit rate >= 85%, TTFT p50 >= 3x lower than round robin's, the busiest
#     instance's requests <= 1.5x the mean, no failed request
#     (CLUSTER_TEST_RELAXED=1: floors for an overloaded machine). Before it,
#     prompts that share their first KEY_BYTES bytes (text, token ids, chat, a
#     body past HAProxy's buffer) must all reach one instance.
#  2. One instance SIGKILLed under streaming load (tests/cluster/kill_check.py,
#     instances of stories260K with 2 MiB KV each):
#     its open streams close (no hang), every request sent after the kill
#     succeeds, the restarted instance rejoins within the health-check
#     interval and serves new keys; counts sent / succeeded / failed by cause.
#
# Env: TERN_BINARY (default <repo>/build/tern), TERN_MODELS_DIR (default
# <repo>/../shared/models), ROUNDS (A B rounds, default 2), AFFINITY (sticky,
# the default, or hash: scripts/cluster.sh --balance), CLUSTER_TEST_RELAXED=1,
# TERN_REQUIRE_TEST_DATA=1 (fail instead of skipping when haproxy, curl or the
# model is missing). Stops every process it starts.
set -uo pipefail
unset TERN_API_KEY

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
binary="${TERN_BINARY:-$repo/build/tern}"
models="${TERN_MODELS_DIR:-$repo/../shared/models}"
vocab="$models/stories260K.gguf"
rounds="${ROUNDS:-2}"
relaxed="${CLUSTER_TEST_RELAXED:-0}"
affinity="${AFFINITY:-sticky}"

skip() {
  if [[ "${TERN_REQUIRE_TEST_DATA:-0}" == 1 ]]; then
    echo "cluster: FAILED: $* (TERN_REQUIRE_TEST_DATA=1)" >&2
    exit 1
  fi
  echo "cluster: SKIPPED: $*"
  exit 0
}
[[ -f "$vocab" ]] || skip "model $vocab not found (set TERN_MODELS_DIR)"
command -v haproxy >/dev/null || skip "haproxy not installed (make deps)"
command -v curl >/dev/null || skip "curl not installed (make deps)"
command -v python3 >/dev/null || skip "python3 not installed (make deps)"
[[ -x "$binary" ]] || { echo "cluster: FAILED: tern binary not found at $binary" >&2; exit 1; }

work="$(mktemp -d -t tern-cluster-test.XXXXXX)"
# The instances serve a random-weight model with stories260K's tokenizer
# whose 512-token prefill costs 0.03-0.1 s at 1 thread against a few ms for
# a cached prefix + 16 tokens, so the TTFT that affinity saves stands above
# HTTP and scheduling overhead (on stories260K itself a whole prefill costs
# about as much as the overhead, and TTFT ratios are the machine's noise).
# With a KV cache of 4 prompts (below) round robin's median request misses
# the cache: with 6 (10 MiB), its median was a hit and the ratio came only
# from queueing behind the misses, which a fast machine hardly has (Zen 5:
# 2.4-4.1x at 10 MiB, 11.6-11.9x at 6 MiB, 3 rounds each).
model="$work/cluster-model.gguf"
"$binary" model synth --preset tiny --n-embd 384 --n-layer 6 --n-head 6 --n-head-kv 2 \
  --n-ff 1024 --ctx 1024 --type q8_0 --vocab-from "$vocab" -o "$model" >"$work/synth.log" 2>&1 || {
  cat "$work/synth.log" >&2
  echo "cluster: FAILED: tern model synth" >&2
  rm -rf "$work"
  exit 1
}
export RUN_DIR="$work/run" TERN="$binary" MODEL="$model"
cleanup() {
  "$repo/scripts/cluster.sh" down --run-dir "$RUN_DIR" >/dev/null 2>&1
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

up() {  # balance [extra tern serve flags]
  local balance=$1
  shift
  "$repo/scripts/cluster.sh" up -n 3 -t 1 --port 0 --stats-port 0 --base-port 0 \
    --kv-cache-memory "${KV_CACHE_MEMORY:-6MiB}" --balance "$balance" -- "$@" >"$work/up.log" 2>&1 || {
    cat "$work/up.log" >&2
    echo "cluster: FAILED: scripts/cluster.sh up --balance $balance" >&2
    exit 1
  }
  # shellcheck disable=SC1091
  source "$RUN_DIR/cluster.env"
}
down() { "$repo/scripts/cluster.sh" down --run-dir "$RUN_DIR" >/dev/null; }

fail=0
# ---- the key: the same leading part goes to the same instance --------------
instance_of() {  # path body
  printf '%s' "$2" >"$work/body.json"
  curl -s -m 30 -o /dev/null -D - "$FRONT_URL$1" -H 'Content-Type: application/json' \
    --data-binary @"$work/body.json" |
    tr -d '\r' | awk -F': ' 'tolower($1)=="x-tern-instance" {print $2}'
}
check_key() {
  # Leading parts longer than the key: 300 bytes of text, 100 token ids; "big":
  # a body larger than HAProxy's 64 KiB buffer (tern answers 400, too long).
  long_text="$(printf 'The system prompt of this app, line %02d. ' $(seq 1 8))"
  long_ids="$(seq -s, 300 399)"
  filler="$(head -c 70000 /dev/zero | tr '\0' x)"
  for form in text ids chat big; do
    seen=""
    for tail in "a red ball" "a blue kite" "the green sea" "tall trees"; do
      case $form in
        text) path=/v1/completions
              body='{"model":"m","max_tokens":1,"prompt":"'"$long_text"' The user asks about '"$tail"'"}' ;;
        ids) path=/v1/completions
             body='{"model":"m","max_tokens":1,"prompt":[1,'"$long_ids"','"$((400 + ${#tail}))"']}' ;;
        big) path=/v1/completions
             body='{"model":"m","max_tokens":1,"prompt":"'"$long_text $filler $tail"'"}' ;;
        chat) path=/v1/chat/completions
              body='{"model":"m","max_tokens":1,"messages":[{"role":"system","content":"You are the helper of app chat."},{"role":"user","content":"'"$tail"'"}]}' ;;
      esac
      seen+="$(instance_of "$path" "$body") "
    done
    read -ra got <<<"$seen"
    if [[ ${#got[@]} != 4 || "${got[0]}" != "${got[1]}" || "${got[0]}" != "${got[2]}" || "${got[0]}" != "${got[3]}" ]]; then
      echo "cluster: FAILED: $form prompts with one leading part went to: $seen" >&2
      fail=1
    else
      echo "cluster: key ($form): 4 prompts sharing their first $KEY_BYTES bytes all on ${got[0]}"
    fi
  done
}

# ---- the names a scheduler expecting vLLM's reads -----------------------------
check_metric_names() {  # url: an instance run with --metrics-prefix vllm
  local page missing=""
  # The cache's info metric appears once the model is loaded: a loaded
  # machine may still be loading right after the cluster comes up.
  for _ in $(seq 1 40); do
    page="$(curl -s -m 5 "$1/metrics")"
    missing=""
    for name in 'vllm:num_requests_waiting{' 'vllm:num_requests_running{' \
                'vllm:kv_cache_usage_perc{' 'vllm:gpu_cache_usage_perc{' \
                'vllm:cache_config_info{block_size="16",num_gpu_blocks="' \
                'vllm:prefix_cache_queries_total{' 'vllm:prefix_cache_hits_total{'; do
      grep -qF "$name" <<<"$page" || missing+=" $name"
    done
    [[ -z "$missing" ]] && break
    sleep 0.5
  done
  if [[ -n "$missing" ]] || grep -q '^tern:' <<<"$page"; then
    echo "cluster: FAILED: $1/metrics under --metrics-prefix vllm lacks:${missing:- nothing, but has tern: names}" >&2
    fail=1
  else
    echo "cluster: --metrics-prefix vllm: $1/metrics has vLLM's names (queue, running, KV use, cache config, prefix-cache counters)"
  fi
}

# ---- 1. affinity vs round robin ---------------------------------------------
bench() {  # balance round [keep: leave the cluster up]
  if [[ "$1" == roundrobin ]]; then
    up roundrobin
  else
    # Affinity instances name their metrics as vLLM does; bench serve reads
    # its hit rates from them.
    up "$1" --metrics-prefix vllm
    if [[ "$2" == 1 ]]; then
      check_metric_names "${INSTANCE_URLS%%,*}"
      check_key
    fi
  fi
  "$binary" bench serve --tokenizer "$model" --base-url "$FRONT_URL" \
    --dataset-name prefix-repetition --prefix-repetition-prefix-len 512 \
    --prefix-repetition-suffix-len 16 --prefix-repetition-num-prefixes 8 \
    --prefix-repetition-output-len 8 --num-prompts 128 --request-rate 50 --max-concurrency 12 \
    --ignore-eos --seed "$2" --instance-metrics "$INSTANCE_URLS" \
    --save-result "$work/$1-$2.json" >"$work/$1-$2.txt" 2>&1 || {
    cat "$work/$1-$2.txt" >&2
    echo "cluster: FAILED: bench serve ($1, round $2)" >&2
    fail=1
  }
  [[ "${3:-}" == keep ]] || down
}
# Alternated, round robin first.
for ((r = 1; r <= rounds; ++r)); do
  bench roundrobin "$r"
  bench "$affinity" "$r"
done
python3 - "$work" "$rounds" "$relaxed" "$affinity" <<'EOF' || fail=1
import json, os, sys
work, rounds, relaxed, affinity = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1", sys.argv[4]
def load(b, r):
    with open(os.path.join(work, "%s-%d.json" % (b, r))) as f:
        return json.load(f)
# The issue's figures, in every round; CLUSTER_TEST_RELAXED=1: floors for a
# machine too loaded for latencies to mean much.
want_hit, want_gain, want_ratio, want_spread = (0.75, 0.05, 1.0, 2.0) if relaxed else (0.85, 0.0, 3.0, 1.5)
# CLUSTER_TEST_MIN_TTFT_RATIO overrides the TTFT floor (e.g. on a machine
# where latencies mean little).
want_ratio = float(os.environ.get("CLUSTER_TEST_MIN_TTFT_RATIO", want_ratio))
bad = []
for r in range(1, rounds + 1):
    try:
        a, b = load(affinity, r), load("roundrobin", r)
    except (OSError, ValueError) as e:
        bad.append("round %d: no result (%s)" % (r, e))
        continue
    hit, rr_hit = a["prefix_cache_hit_rate"], b["prefix_cache_hit_rate"]
    ratio = b["median_ttft_ms"] / a["median_ttft_ms"] if a["median_ttft_ms"] > 0 else 0.0
    spread = a["instance_max_over_mean"]
    print("cluster: round %d (seed %d): hit rate %s %.1f%% vs round robin %.1f%%; TTFT p50 %.1f ms "
          "vs %.1f ms (ratio %.2fx); requests per instance %s (busiest/mean %.2f), in flight %s "
          "(busiest/mean %.2f); failed %d + %d" % (
              r, r, affinity, 100 * hit, 100 * rr_hit, a["median_ttft_ms"], b["median_ttft_ms"],
              ratio, "/".join("%d" % i["requests"] for i in a["instances"]), spread,
              "/".join("%.2f" % i["mean_in_flight"] for i in a["instances"]),
              a["instance_in_flight_max_over_mean"], a["failed"], b["failed"]))
    for name, v, want, ok, op in (
            ("hit rate", hit, want_hit, hit >= want_hit, ">="),
            ("hit rate over round robin's", hit - rr_hit, want_gain, hit - rr_hit >= want_gain, ">="),
            ("TTFT p50 ratio (round robin / affinity)", ratio, want_ratio, ratio >= want_ratio, ">="),
            ("busiest instance's requests / mean", spread, want_spread, spread <= want_spread, "<="),
            ("failed requests", a["failed"] + b["failed"], 0, a["failed"] + b["failed"] == 0, "==")):
        if not ok:
            bad.append("round %d: %s %.3f, want %s %.3f" % (r, name, v, op, want))
for line in bad:
    print("cluster: FAILED: " + line, file=sys.stderr)
sys.exit(1 if bad else 0)
EOF

# ---- 2. one instance killed under streaming load ----------------------------
# On stories260K itself: 25 streams a second of 600 tokens each stay within
# what 2 instances on a 2-core machine serve while the third is down.
MODEL="$vocab" KV_CACHE_MEMORY=2MiB up "$affinity"
python3 "$here/kill_check.py" --run-dir "$RUN_DIR" --cluster-sh "$repo/scripts/cluster.sh" \
  || fail=1
down

if [[ $fail != 0 ]]; then
  echo "cluster: FAILED" >&2
  exit 1
fi
echo "cluster: PASSED"
