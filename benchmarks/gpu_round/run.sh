#!/usr/bin/env bash
# The GPU checks that a CPU machine cannot make, one stage per device call (each under the 10-minute limit of a
# call on an H100 or H200). From the project root on the GPU host, with $OUT set (the device tool sets it):
#
#   bash benchmarks/gpu_round/run.sh verdicts [OLD_TREE]
#                                               # ~9 min: what the confinement costs an evaluation against
#                                               # OLD_TREE (a tree before it, e.g. `git archive 796648c`); what
#                                               # the held-out checks cost a candidate (candidate_cost.py); every
#                                               # honest kernel under the full sandbox (seccomp filter, locked
#                                               # mounts, no capabilities) with 3 held-out shapes a verification
#                                               # (two benchmark shapes timed): each `ok`, none `wrong` or
#                                               # `suspicious`
#   bash benchmarks/gpu_round/run.sh evolve     # ~9 min: a tuning evolution of fp8_gemm_kmajor, >= 150 candidates,
#                                               # held-out shapes in every verification: 0 suspicious; its store
#                                               # comes back as store.tgz (for `export`); its best on 20 held-out
#                                               # shapes drawn outside it (held_out_best.py)
#   bash benchmarks/gpu_round/run.sh export STORE_TGZ RUN
#                                               # ~3 min: `ksci export` of that run's best, installed offline in a
#                                               # fresh venv, its package tests run there (benchmarks/export_check.sh)
#   bash benchmarks/gpu_round/run.sh imports REFK
#                                               # ~8 min: the gpu-mode tasks imported where their references run on
#                                               # the GPU (REFK: a reference-kernels checkout carried to the host),
#                                               # then the baselines of the imported tasks and two generations of
#                                               # amd/moe and amd/mla-decode with the scripted LLM server
#
# Each stage prints its summary lines; everything else is in $OUT/logs (packed into logs.tgz).
set -u
cd "$(dirname "$0")/../.."
STAGE="${1:?usage: run.sh verdicts [OLD_TREE]|evolve|export STORE_TGZ RUN|imports REFK}"
source benchmarks/gpu_round/common.sh
case "$STAGE" in
  verdicts)
    if [ -n "${2:-}" ]; then
      timeout 110 python3 benchmarks/sandbox_hostile.py --no-hostile --cost --tree "$2" --reps 3 \
        > "$OUT/sandbox-cost.txt" 2>&1
      echo "sandbox_hostile --cost rc $?"; tail -6 "$OUT/sandbox-cost.txt"
    fi
    timeout 120 python3 benchmarks/candidate_cost.py --problem fp8_gemm_kmajor --template wgmma --reps 2 \
      > "$OUT/candidate-cost.txt" 2>&1
    echo "candidate_cost rc $?"; tail -20 "$OUT/candidate-cost.txt"
    timeout 330 python3 benchmarks/adversarial.py --only honest --quick-honest --held-out 3 \
      --json-out "$OUT/logs/honest.json" \
      > "$OUT/honest.txt" 2>&1
    echo "adversarial --only honest rc $?"; grep -v "^    " "$OUT/honest.txt" | tail -30
    ;;
  evolve)
    rm -rf /tmp/gpu-round-evolve
    timeout 450 python3 benchmarks/tuning_throughput.py --label kmajor-held --race --overlap 1 --candidates 150 \
      --minutes 6.5 --deadline 415 --keep /tmp/gpu-round-evolve --save "$OUT/logs/throughput.json" \
      > "$OUT/logs/evolve.txt" 2>&1
    echo "tuning_throughput rc $?"; tail -8 "$OUT/logs/evolve.txt"
    python3 - <<'PY' | tee "$OUT/verdicts.txt"
from ksci.lineage.store import LineageStore
rows = LineageStore("/tmp/gpu-round-evolve/store").read("throughput-kmajor-held")
print("candidates", len(rows), "verdicts", rows["status"].value_counts().to_dict())
for _, row in rows[rows["status"] != "ok"].head(12).iterrows():
    print(" ", row["status"], str(row.get("message", ""))[:300])
PY
    tar czf "$OUT/store.tgz" -C /tmp/gpu-round-evolve store
    timeout 80 python3 benchmarks/held_out_best.py --store /tmp/gpu-round-evolve/store --run throughput-kmajor-held \
      --held-out 20 > "$OUT/held-out-best.txt" 2>&1
    echo "held_out_best rc $?"; grep -v "^    " "$OUT/held-out-best.txt" | head -4
    ;;
  export)
    STORE_TGZ="${2:?the store.tgz of the evolve stage}"; RUN="${3:-throughput-kmajor-held}"
    rm -rf /tmp/gpu-round-store && mkdir -p /tmp/gpu-round-store && tar xzf "$STORE_TGZ" -C /tmp/gpu-round-store
    timeout 400 bash benchmarks/export_check.sh "$OUT/logs/export" "$RUN" /tmp/gpu-round-store/store \
      > "$OUT/export.txt" 2>&1
    echo "export_check rc $?"; grep -v "^    " "$OUT/export.txt" | tail -30
    ;;
  imports)
    REFK="${2:?a gpu-mode reference-kernels checkout}"
    timeout 300 python3 benchmarks/import_corpus.py --gpumode "$REFK" --timeout 200 --jobs 4 \
      > "$OUT/imports.txt" 2>&1
    echo "import_corpus rc $?"; grep -E "imported|refused" "$OUT/imports.txt" | tail -45
    timeout 240 python3 benchmarks/imported_gpu_round.py --tasks "$REFK/problems" \
      --only amd/moe amd/mla-decode linalg/cholesky_py pmpp/sort_py > "$OUT/imported-round.txt" 2>&1
    echo "imported_gpu_round rc $?"; tail -30 "$OUT/imported-round.txt"
    ;;
  *) echo "unknown stage $STAGE"; exit 2 ;;
esac
