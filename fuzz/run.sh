#!/usr/bin/env bash
# Runs libFuzzer targets for FUZZ_SECONDS each (default 600; FUZZ_TIMEOUT:
# seconds one input may take, default 20) and prints one
# summary line per target: executions, executions/s, coverage (edges
# covered, libFuzzer's "cov"), corpus size.
#   bash fuzz/run.sh BUILD_DIR TARGET...    (targets: gguf tokenizer ...)
# Corpus: BUILD_DIR/fuzz-corpus/TARGET (kept between runs), seeded from
# fuzz/make_seeds.py (test data, shared models) and fuzz/regressions/TARGET
# (every input that once crashed; replayed on every run). A crash, leak,
# timeout or sanitizer report fails the run; its input is saved as
# BUILD_DIR/fuzz-artifacts/TARGET-crash-* (add it to fuzz/regressions/).
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
build="$(cd "$1" && pwd)"
shift
seconds="${FUZZ_SECONDS:-600}"
models="${TERN_MODELS_DIR:-$repo/../shared/models}"
seeds="$build/fuzz-seeds"
rm -rf "$seeds"
python3 "$here/make_seeds.py" "$seeds" "$models" || exit 1
mkdir -p "$build/fuzz-artifacts"
status=0
for t in "$@"; do
  bin="$build/fuzz_$t"
  if [[ "$t" == tokenizer && ! -d "$models/vocab" ]]; then
    if [[ "${TERN_REQUIRE_TEST_DATA:-0}" == 1 ]]; then
      echo "fuzz $t: FAILED: no vocabularies under $models" >&2
      status=1
    else
      echo "fuzz $t: SKIPPED: no vocabularies under $models (set TERN_MODELS_DIR)"
    fi
    continue
  fi
  corpus="$build/fuzz-corpus/$t"
  mkdir -p "$corpus" "$seeds/$t" "$here/regressions/$t"
  log="$build/fuzz-artifacts/$t.log"
  TERN_MODELS_DIR="$models" ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
    "$bin" -max_total_time="$seconds" -timeout="${FUZZ_TIMEOUT:-20}" -rss_limit_mb=3072 -max_len=65536 \
    -print_final_stats=1 -artifact_prefix="$build/fuzz-artifacts/$t-" \
    "$corpus" "$seeds/$t" "$here/regressions/$t" >"$log" 2>&1
  rc=$?
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  files=$(ls "$corpus" | wc -l)
  if [[ $rc -ne 0 ]]; then
    echo "fuzz $t: FAILED (exit $rc) after ${runs:-?} runs; see $log" >&2
    grep -E "ERROR|SUMMARY|Test unit written" "$log" | head -5 >&2
    status=1
  else
    echo "fuzz $t: ok, ${seconds}s, ${runs} runs, ${speed} exec/s, cov ${cov}, corpus ${files}"
  fi
done
exit $status
