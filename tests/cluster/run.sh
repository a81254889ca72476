#!/usr/bin/env bash
# Scale-out test (ctest -R '^cluster$'): 3 `tern serve` instances of
# stories260K (1 thread each) behind HAProxy, started by scripts/cluster.sh.
#
#  1. Affinity vs round robin, alternated (B A B A, same prompts per round):
#     8 distinct 512-token system prompts x 16 requests each, shuffled, each
#     with a 16-token user part, Poisson arrivals at 50 req/s, at most 12 in
#     flight (`tern bench serve --dataset-name prefix-repetition
#     --instance-metrics`). Each instance's KV cache (1792 KiB, 179 blocks of
#     16 tokens) holds about 5 of the 8 prompts: twice its share, not all.
#     Reports the pooled prefix-cache hit rate, the TTFT p50 ratio (round
#     robin / affinity) and the busiest instance's requests over the mean.
#     Asserts safe floors (the machine may be shared and noisy); with
#     CLUSTER_TEST_STRICT=1 the issue's figures: hit rate >= 85%, TTFT ratio
#     >= 3, busiest <= 1.5x the mean. Before it, prompts that share their
#     first KEY_BYTES bytes (text, token ids, chat, a body past HAProxy's
#     buffer) must all reach one instance.
#  2. One instance SIGKILLed under streaming load (tests/cluster/kill_check.py):
#     its open streams close (no hang), every request sent after the kill
#     succeeds, the restarted instance rejoins within the health-check
#     interval; counts sent / succeeded / failed by cause.
#
# Env: TERN_BINARY (default <repo>/build/tern), TERN_MODELS_DIR (default
# <repo>/../shared/models), ROUNDS (A B rounds, default 2),
# CLUSTER_TEST_STRICT=1, TERN_REQUIRE_TEST_DATA=1 (fail instead of skipping
# when haproxy, curl or the model is missing). Stops every process it starts.
set -uo pipefail
unset TERN_API_KEY

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
binary="${TERN_BINARY:-$repo/build/tern}"
models="${TERN_MODELS_DIR:-$repo/../shared/models}"
model="$models/stories260K.gguf"
rounds="${ROUNDS:-2}"
strict="${CLUSTER_TEST_STRICT:-0}"

skip() {
  if [[ "${TERN_REQUIRE_TEST_DATA:-0}" == 1 ]]; then
    echo "cluster: FAILED: $* (TERN_REQUIRE_TEST_DATA=1)" >&2
    exit 1
  fi
  echo "cluster: SKIPPED: $*"
  exit 0
}
[[ -f "$model" ]] || skip "model $model not found (set TERN_MODELS_DIR)"
command -v haproxy >/dev/null || skip "haproxy not installed (make deps)"
command -v curl >/dev/null || skip "curl not installed (make deps)"
command -v python3 >/dev/null || skip "python3 not installed (make deps)"
[[ -x "$binary" ]] || { echo "cluster: FAILED: tern binary not found at $binary" >&2; exit 1; }

work="$(mktemp -d -t tern-cluster-test.XXXXXX)"
export RUN_DIR="$work/run" TERN="$binary" MODEL="$model"
cleanup() {
  "$repo/scripts/cluster.sh" down --run-dir "$RUN_DIR" >/dev/null 2>&1
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

up() {  # balance
  "$repo/scripts/cluster.sh" up -n 3 -t 1 --port 0 --stats-port 0 --base-port 0 \
    --kv-cache-memory "${KV_CACHE_MEMORY:-1792KiB}" --balance "$1" >"$work/up.log" 2>&1 || {
    cat "$work/up.log" >&2
    echo "cluster: FAILED: scripts/cluster.sh up --balance $1" >&2
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

# ---- 1. affinity vs round robin ---------------------------------------------
bench() {  # balance round [keep: leave the cluster up]
  up "$1"
  [[ "$1" == hash && "$2" == 1 ]] && check_key
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
# Alternated, round robin first, so that the last cluster up is an affinity
# one, kept for part 2.
for ((r = 1; r <= rounds; ++r)); do
  bench roundrobin "$r"
  bench hash "$r" "$([[ $r == "$rounds" ]] && echo keep)"
done
python3 - "$work" "$rounds" "$strict" <<'EOF' || fail=1
import json, os, statistics, sys
work, rounds, strict = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
def load(b, r):
    with open(os.path.join(work, "%s-%d.json" % (b, r))) as f:
        return json.load(f)
hit = {"hash": [], "roundrobin": []}
ratio, spread = [], []
for r in range(1, rounds + 1):
    a, b = load("hash", r), load("roundrobin", r)
    for name, j in (("hash", a), ("roundrobin", b)):
        hit[name].append(j["prefix_cache_hit_rate"])
    ratio.append(b["median_ttft_ms"] / a["median_ttft_ms"])
    spread.append(a["instance_max_over_mean"])
    print("cluster: round %d: hit rate affinity %.1f%% vs round robin %.1f%%; TTFT p50 %.1f ms vs "
          "%.1f ms (ratio %.2fx); affinity requests per instance %s (busiest/mean %.2f); "
          "failed %d + %d" % (
              r, 100 * a["prefix_cache_hit_rate"], 100 * b["prefix_cache_hit_rate"],
              a["median_ttft_ms"], b["median_ttft_ms"], ratio[-1],
              "/".join("%d" % i["requests"] for i in a["instances"]),
              a["instance_max_over_mean"], a["failed"], b["failed"]))
h, rr = statistics.mean(hit["hash"]), statistics.mean(hit["roundrobin"])
q, s = statistics.median(ratio), max(spread)
print("cluster: affinity: hit rate %.1f%% (round robin %.1f%%), TTFT p50 ratio %.2fx (median of "
      "rounds), busiest instance %.2fx the mean (worst round)" % (100 * h, 100 * rr, q, s))
# Floors that hold on a loaded machine; the issue's figures with CLUSTER_TEST_STRICT=1.
floors = [("hit rate", h, 0.85 if strict else 0.75, ">="),
          ("hit rate over round robin's", h - rr, 0.0 if strict else 0.05, ">="),
          ("TTFT p50 ratio", q, 3.0 if strict else 1.0, ">="),
          ("busiest/mean", s, 1.5 if strict else 2.0, "<=")]
bad = [(n, v, f, op) for n, v, f, op in floors if (v < f if op == ">=" else v > f)]
for n, v, f, op in bad:
    print("cluster: FAILED: %s %.3f, want %s %.3f" % (n, v, op, f), file=sys.stderr)
sys.exit(1 if bad else 0)
EOF

# ---- 2. one instance killed under streaming load ----------------------------
python3 "$here/kill_check.py" --run-dir "$RUN_DIR" --cluster-sh "$repo/scripts/cluster.sh" \
  || fail=1
down

if [[ $fail != 0 ]]; then
  echo "cluster: FAILED" >&2
  exit 1
fi
echo "cluster: PASSED"
