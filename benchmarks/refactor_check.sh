#!/usr/bin/env bash
# Issue 25's behaviour check on a GPU host: the same runs on the tree before the refactoring (BEFORE, a checkout of
# 1db6a33: `git archive 1db6a33 | tar -x -C .before`) and on this tree, one after the other on the same machine:
#   1. a tuning `ksci evolve` of fp8_gemm_kmajor from scratch (GENERATIONS x CHILDREN, seed 0, GPU 0);
#   2. the scripted-LLM evolution (benchmarks/llm_evolve_scripted.py: 3 generations of fp8_gemm, scripted answers);
#   3. a continued run: BEFORE writes 2 generations of a run, this tree continues it with `--run` to 3 generations
#      in the same store (its cache keys are new, so generations 0-1 are recomputed once; no row may be written
#      twice).
# Then benchmarks/refactor_summary.py prints the table (candidates, verdicts, best geomean, cuBLASLt, wall time).
# Usage: benchmarks/refactor_check.sh OUT BEFORE_DIR [PARTS] [GENERATIONS] [CHILDREN]
#   PARTS: any of tuning,llm,continued (default all three), so that a device call of 10 minutes can take a part.
# Rehearsal without a GPU: KSCI_SIMULATE=1 passes --simulate (made-up timings).
set -uo pipefail
if [ $# -lt 2 ]; then
  sed -n '2,12p' "$0" >&2
  exit 2
fi
out=$(realpath "$1") before=$(realpath "$2") parts=${3:-tuning,llm,continued} generations=${4:-3} children=${5:-6}
after=$(pwd)
mkdir -p "$out/stores"
sim=${KSCI_SIMULATE:+--simulate}

evolve() { # TREE LABEL LOG ARGS...: ksci evolve in TREE (its own Prefect home and cache), wall time in the log
  local tree=$1 label=$2 log=$3
  shift 3
  local started
  started=$(date +%s)
  (cd "$tree" && PYTHONPATH="$tree:${PYTHONPATH:-}" python3 -m ksci.cli evolve --target cuda --gpus 0 $sim "$@") \
    >"$log" 2>&1
  local rc=$?
  echo "== $label: exit $rc after $(($(date +%s) - started)) s" | tee -a "$log"
}

for side in before after; do
  [[ ,$parts, == *,tuning,* ]] || break
  tree=$([ $side = before ] && echo "$before" || echo "$after")
  evolve "$tree" "tuning-$side" "$out/tuning-$side.log" --problem fp8_gemm_kmajor --proposer tuning \
    --generations "$generations" --children "$children" --seed 0 --run "tuning-$side" --store "$out/stores/$side"
done
for side in before after; do
  [[ ,$parts, == *,llm,* ]] || break
  tree=$([ $side = before ] && echo "$before" || echo "$after")
  started=$(date +%s)
  (cd "$tree" && PYTHONPATH="$tree:${PYTHONPATH:-}" python3 benchmarks/llm_evolve_scripted.py $sim \
    --store "$out/stores/$side-llm" --run "llm-$side") >"$out/llm-$side.log" 2>&1
  echo "== llm-$side: exit $? after $(($(date +%s) - started)) s" | tee -a "$out/llm-$side.log"
done
[[ ,$parts, == *,continued,* ]] && evolve "$before" "continued-written-before" "$out/continued-before.log" --problem fp8_gemm_kmajor \
  --proposer tuning --generations 2 --children 4 --seed 0 --run continued --store "$out/stores/continued"
[[ ,$parts, == *,continued,* ]] && evolve "$after" "continued-after" "$out/continued-after.log" --problem fp8_gemm_kmajor \
  --proposer tuning --generations 3 --children 4 --seed 0 --run continued --store "$out/stores/continued"
PYTHONPATH="$after:${PYTHONPATH:-}" python3 "$after/benchmarks/refactor_summary.py" "$out"
