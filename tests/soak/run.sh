#!/usr/bin/env bash
# Soak test of `tern serve` (see soak.mjs): starts a server with a small KV
# budget (preemptions) and prefix caching, runs the soak, stops the server.
#   SOAK_REQUESTS=2000 TERN_BINARY=build/tern bash tests/soak/run.sh
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
binary="${TERN_BINARY:-$repo/build/tern}"
models="${TERN_MODELS_DIR:-$repo/../shared/models}"
model="$models/stories260K.gguf"
if [[ ! -f "$model" ]]; then
  if [[ "${TERN_REQUIRE_TEST_DATA:-0}" == 1 ]]; then
    echo "soak: FAILED: model $model not found and TERN_REQUIRE_TEST_DATA=1" >&2
    exit 1
  fi
  echo "soak: SKIPPED: model $model not found (set TERN_MODELS_DIR)"
  exit 0
fi
if ! command -v node >/dev/null 2>&1; then
  echo "soak: SKIPPED: node is needed (make deps installs it)"
  exit 0
fi
log="$(mktemp -t tern-soak.XXXXXX.log)"
"$binary" serve -m "$model" --host 127.0.0.1 --port 0 -t 1 --kv-cache-memory "${SOAK_KV:-256KiB}" \
  --enable-prefix-caching --max-num-seqs 64 >"$log" 2>&1 &
pid=$!
trap 'kill -TERM $pid 2>/dev/null; wait $pid 2>/dev/null' EXIT
url=""
for _ in $(seq 1 300); do
  url="$(sed -n 's/.*listening on \(http:\/\/[^ ]*\).*/\1/p' "$log" | head -1)"
  [[ -n "$url" ]] && curl -sf "$url/health" >/dev/null 2>&1 && break
  kill -0 $pid 2>/dev/null || { echo "soak: FAILED: server exited" >&2; cat "$log" >&2; exit 1; }
  sleep 0.1
done
[[ -n "$url" ]] || { echo "soak: FAILED: server did not start" >&2; cat "$log" >&2; exit 1; }
TERN_BASE_URL="$url" TERN_SERVER_PID=$pid node "$here/soak.mjs"
