#!/usr/bin/env bash
# Issue 17's evolution check, on a GPU host: for each PROBLEM:GPU pair, a tuning-only `ksci evolve` from scratch on
# that one GPU, bounded by --max-candidates and --time-limit, then benchmarks/evolution_result.py on the same GPU
# (the run's best kernel of generation 0 and its best overall, timed again through the harness beside cuBLASLt,
# per shape). Pairs run side by side, each with a Prefect home of its own (one embedded API each).
#
# Usage: benchmarks/tuning_evolution.sh OUT MINUTES MAX_CANDIDATES CHILDREN PROBLEM:GPU [PROBLEM:GPU ...]
#   e.g. benchmarks/tuning_evolution.sh $OUT 4.5 160 8 fp8_gemm_kmajor:0 fp8_gemm:1
# Writes OUT/PROBLEM-evolve.log, OUT/PROBLEM-result.txt (the table), OUT/PROBLEM-result.json and OUT/runs.tar.gz
# (the lineage: `ksci report --store DIR --run RUN` builds the report from it anywhere).
# Rehearsal without a GPU: KSCI_SIMULATE=1 passes --simulate (made-up timings; the timed-again step then fails).
set -uo pipefail
if [ $# -lt 5 ]; then
  sed -n '7,8p' "$0" >&2
  exit 2
fi
out=$1 minutes=$2 cap=$3 children=$4
shift 4
mkdir -p "$out"
store="$PWD/data/runs"
stamp=$(date -u +%Y%m%d-%H%M%S)
for pair in "$@"; do
  problem=${pair%%:*} gpu=${pair##*:}
  run="$problem-tuning-$stamp"
  (
    export PREFECT_HOME="$PWD/data/prefect-gpu$gpu"
    started=$(date +%s)
    python3 -m ksci.cli evolve --problem "$problem" --target cuda --proposer tuning --gpus "$gpu" \
      --generations 1000 --children "$children" --max-candidates "$cap" --time-limit "$minutes" \
      --run "$run" --store "$store" ${KSCI_SIMULATE:+--simulate} >"$out/$problem-evolve.log" 2>&1
    echo "ksci evolve exit $? after $(($(date +%s) - started)) s" >>"$out/$problem-evolve.log"
    CUDA_VISIBLE_DEVICES=$gpu python3 benchmarks/evolution_result.py --store "$store" --run "$run" \
      --json-out "$out/$problem-result.json" >"$out/$problem-result.txt" 2>&1
    echo "evolution_result exit $? after $(($(date +%s) - started)) s" >>"$out/$problem-result.txt"
  ) &
done
wait
tar -czf "$out/runs.tar.gz" -C "$(dirname "$store")" "$(basename "$store")"
for pair in "$@"; do
  problem=${pair%%:*}
  echo "== $problem"
  grep -E "^ksci evolve exit|stops before|^\[#" "$out/$problem-evolve.log" | tail -4
  cat "$out/$problem-result.txt"
done
