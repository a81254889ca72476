#!/usr/bin/env bash
# Browser test of the `tern serve` dashboard in headless Chromium: the page
# loads with no console errors, its charts update while `tern bench serve`
# loads the server, the playground streams a reply (after asking for the API
# key); a screenshot is saved as an artifact.
#   TERN_BINARY=build/tern bash tests/dashboard/run.sh
# Env: TERN_BINARY (default <repo>/build/tern), TERN_MODELS_DIR (default
# <repo>/../shared/models), CHROMIUM (default: chromium on the PATH),
# TERN_ARTIFACTS_DIR (default: dashboard/ beside the binary, i.e. build/dashboard).
# Skips (exit 0) when the model, node/npm or Chromium is missing; Chromium is
# Debian's `chromium` (make deps installs it), playwright-core comes from npm
# and downloads no browser.
set -uo pipefail
unset TERN_API_KEY

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
binary="${TERN_BINARY:-$repo/build/tern}"
models="${TERN_MODELS_DIR:-$repo/../shared/models}"
model="$models/stories260K.gguf"

if [[ ! -f "$model" ]]; then
  if [[ "${TERN_REQUIRE_TEST_DATA:-0}" == 1 ]]; then
    echo "dashboard: FAILED: model $model not found and TERN_REQUIRE_TEST_DATA=1" >&2
    exit 1
  fi
  echo "dashboard: SKIPPED: model $model not found (set TERN_MODELS_DIR)"
  exit 0
fi
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  echo "dashboard: SKIPPED: node and npm are needed (make deps installs them)"
  exit 0
fi
chromium="${CHROMIUM:-$(command -v chromium || command -v chromium-browser || true)}"
if [[ -z "$chromium" || ! -x "$chromium" ]]; then
  echo "dashboard: SKIPPED: Debian's chromium is needed (make deps installs it)"
  exit 0
fi
if [[ ! -x "$binary" ]]; then
  echo "dashboard: FAILED: tern binary not found at $binary (set TERN_BINARY)" >&2
  exit 1
fi
binary="$(cd "$(dirname "$binary")" && pwd)/$(basename "$binary")"
artifacts="${TERN_ARTIFACTS_DIR:-$(dirname "$binary")/dashboard}"
mkdir -p "$artifacts"

if [[ ! -d "$here/node_modules/playwright-core" ]]; then
  echo "dashboard: installing the pinned test dependencies (npm ci: playwright-core; no browser download)"
  (cd "$here" && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund --silent) || {
    echo "dashboard: FAILED: npm ci did not succeed" >&2
    exit 1
  }
fi

port="$(node -e 'const s=require("net").createServer();s.listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')"
key="dashboard-test-key"
log="$artifacts/server.log"
"$binary" serve -m "$model" --host 127.0.0.1 --port "$port" --chat-template chatml \
  --served-model-name stories260K -t 1 --kv-cache-memory 64MiB --api-key "$key" >"$log" 2>&1 &
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
  echo "dashboard: FAILED: the server did not become ready; its log:" >&2
  cat "$log" >&2
  exit 1
fi

TERN_BASE_URL="$base" TERN_BINARY="$binary" TERN_MODEL="$model" TERN_API_KEY_FOR_TEST="$key" \
  CHROMIUM="$chromium" TERN_ARTIFACTS_DIR="$artifacts" \
  node --test --test-concurrency=1 "$here"/*.test.mjs
status=$?
if [[ $status -ne 0 ]]; then
  echo "dashboard: server log:" >&2
  tail -n 30 "$log" >&2
else
  echo "dashboard: screenshot $artifacts/dashboard.png"
fi
exit $status
