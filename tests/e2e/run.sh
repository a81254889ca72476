#!/usr/bin/env bash
# End-to-end tests of `tern serve` with the official OpenAI Node client.
#   TERN_BINARY=build/tern bash tests/e2e/run.sh
# Env: TERN_BINARY (default <repo>/build/tern), TERN_MODELS_DIR (default
# <repo>/../shared/models). Skips (exit 0) when the model or node is missing.
set -uo pipefail
# The servers here run without an API key unless a test gives one.
unset TERN_API_KEY

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
binary="${TERN_BINARY:-$repo/build/tern}"
models="${TERN_MODELS_DIR:-$repo/../shared/models}"
model="$models/stories260K.gguf"

if [[ ! -f "$model" ]]; then
  if [[ "${TERN_REQUIRE_TEST_DATA:-0}" == 1 ]]; then
    echo "e2e: FAILED: model $model not found and TERN_REQUIRE_TEST_DATA=1" >&2
    exit 1
  fi
  echo "e2e: SKIPPED: model $model not found (set TERN_MODELS_DIR)"
  exit 0
fi
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  echo "e2e: SKIPPED: node and npm are needed (make deps installs them)"
  exit 0
fi
if [[ ! -x "$binary" ]]; then
  echo "e2e: FAILED: tern binary not found at $binary (set TERN_BINARY)" >&2
  exit 1
fi
binary="$(cd "$(dirname "$binary")" && pwd)/$(basename "$binary")"

if [[ ! -d "$here/node_modules/openai" ]]; then
  echo "e2e: installing the pinned test dependencies (npm ci, from package-lock.json)"
  (cd "$here" && npm ci --no-audit --no-fund --silent) || {
    echo "e2e: FAILED: npm ci did not succeed" >&2
    exit 1
  }
fi

port="$(node -e 'const s=require("net").createServer();s.listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')"
log="$(mktemp -t tern-e2e-server.XXXXXX.log)"
"$binary" serve -m "$model" --host 127.0.0.1 --port "$port" --chat-template chatml \
  --served-model-name stories260K -t 1 --kv-cache-memory 64MiB >"$log" 2>&1 &
server_pid=$!
cleanup() {
  if kill -0 "$server_pid" 2>/dev/null; then
    kill -TERM "$server_pid" 2>/dev/null
    for _ in $(seq 1 100); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$server_pid" 2>/dev/null
  fi
}
trap cleanup EXIT

base="http://127.0.0.1:$port"
ready=0
for _ in $(seq 1 300); do
  if ! kill -0 "$server_pid" 2>/dev/null; then break; fi
  code="$(node -e "fetch('$base/health').then(r=>console.log(r.status)).catch(()=>console.log(0))")"
  if [[ "$code" == "200" ]]; then ready=1; break; fi
  sleep 0.2
done
if [[ "$ready" != 1 ]]; then
  echo "e2e: FAILED: the server did not become ready; its log:" >&2
  cat "$log" >&2
  exit 1
fi

TERN_BASE_URL="$base" TERN_BINARY="$binary" TERN_MODEL="$model" TERN_MODEL_NAME=stories260K \
  node --test --test-concurrency=1 "$here"/*.test.mjs
status=$?

# A clean shutdown on SIGTERM is part of the contract: exit code 0.
kill -TERM "$server_pid"
wait "$server_pid"
server_status=$?
if [[ $status -ne 0 ]]; then
  echo "e2e: server log:" >&2
  tail -n 50 "$log" >&2
fi
if [[ $server_status -ne 0 ]]; then
  echo "e2e: FAILED: the server exited with $server_status after SIGTERM" >&2
  tail -n 20 "$log" >&2
  status=1
fi
rm -f "$log"
exit $status
