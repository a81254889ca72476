#!/usr/bin/env bash
# Speculative decoding on the benchmark pair (docs/speculative.md): grows
# targets from stories260K with `tern model grow` at several noise levels,
# then runs `tern batch` (greedy, 128 tokens a request) at batch sizes 1, 4
# and 16 without speculation, with a fixed k and with adaptive k, alternated
# (none fixed adaptive none fixed adaptive ...), and prints one row per run:
#   noise batch mode rep output_tok_per_s acceptance mean_accepted_length
#
# usage: scripts/spec_bench.sh TERN_BINARY OUT_DIR [REPS]
set -euo pipefail
TERN=${1:?tern binary}
OUT=${2:?output dir}
REPS=${3:-2}
MODELS=${TERN_MODELS_DIR:-$(dirname "$0")/../../shared/models}
SRC=$MODELS/stories260K.gguf
K=${SPEC_K:-4}
mkdir -p "$OUT"
# Prompts: sentences of the sample stories.
python3 - "$MODELS/text/tinystories_sample.txt" "$OUT" <<'PY'
import json, sys
text = open(sys.argv[1]).read().replace("\n", " ")
sentences = [s.strip() + "." for s in text.split(".") if len(s.strip()) > 20]
for b in (1, 4, 16):
    with open(f"{sys.argv[2]}/prompts_{b}.jsonl", "w") as f:
        for i in range(b):
            f.write(json.dumps({"prompt": sentences[i % len(sentences)], "max_tokens": 128,
                                "temperature": 0, "ignore_eos": True}) + "\n")
PY
for noise in ${SPEC_NOISES:-0.005 0.01 0.02 0.03 0.05}; do
  target=$OUT/grown_$noise.gguf
  [ -f "$target" ] || "$TERN" model grow -m "$SRC" --ffn-size 16384 --extra-layers 11 \
      --noise "$noise" -o "$target" 2>/dev/null
  for b in 1 4 16; do
    for rep in $(seq 1 "$REPS"); do
      for mode in none fixed adaptive; do
        flags=()
        case $mode in
          fixed) flags=(--speculative-model "$SRC" --num-speculative-tokens "$K" --speculative-adaptive off) ;;
          adaptive) flags=(--speculative-model "$SRC" --num-speculative-tokens "$K") ;;
        esac
        "$TERN" batch -m "$target" -i "$OUT/prompts_$b.jsonl" -o "$OUT/out.jsonl" \
            --max-num-seqs "$b" --summary-json "$OUT/summary.json" "${flags[@]}" 2>/dev/null
        python3 - "$OUT/summary.json" "$noise" "$b" "$mode" "$rep" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
sp = s.get("speculative", {})
print(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], "%.1f" % s["output_tokens_per_s"],
      "%.3f" % sp.get("acceptance_rate", 0), "%.2f" % sp.get("mean_accepted_length", 1), flush=True)
PY
      done
    done
  done
done
